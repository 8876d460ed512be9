"""Durability: the catalogue (SQLite) and the inputs' logs, and when an append is durable.

Used by :mod:`service.app`; knows no HTTP. See ``docs/durability.md``.
"""

from service.store.catalogue import Catalogue, NewerCatalogue, StoredDataflow
from service.store.durability import Committer, Durability
from service.store.log import CorruptLog, Log, StoreError

__all__ = [
    "Catalogue",
    "Committer",
    "CorruptLog",
    "Durability",
    "Log",
    "NewerCatalogue",
    "StoreError",
    "StoredDataflow",
]
