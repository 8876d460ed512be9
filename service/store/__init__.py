"""The store: the data directory (the SQLite catalogue and the inputs' logs) and durability.

Used by :mod:`service.app`; knows no HTTP and no dataflow. See ``docs/durability.md``.
"""

from service.store.batches import (
    ARROW,
    JSON,
    ArrowRecords,
    Batch,
    BatchError,
    arrow_records,
    json_pairs,
)
from service.store.catalogue import (
    Catalogue,
    DamagedCatalogue,
    MissingCatalogue,
    NewerCatalogue,
    Shape,
    StoredDataflow,
)
from service.store.durability import Committer, Durability
from service.store.lock import DirectoryLocked
from service.store.log import CorruptLog, Log, StoreError
from service.store.operations import (
    Abort,
    Advance,
    BadOperation,
    Checkpoint,
    Close,
    CloseSession,
    Commit,
    CommitState,
    Expire,
    ExpiryState,
    Frame,
    LoggedAck,
    Open,
    Operation,
    Push,
    SessionState,
    Stage,
    TransactionState,
)
from service.store.store import InputLog, Store, WriteRefused, read_frame

__all__ = [
    "ARROW",
    "JSON",
    "Abort",
    "Advance",
    "ArrowRecords",
    "BadOperation",
    "Batch",
    "BatchError",
    "Catalogue",
    "Checkpoint",
    "Close",
    "CloseSession",
    "Commit",
    "CommitState",
    "Committer",
    "CorruptLog",
    "DamagedCatalogue",
    "DirectoryLocked",
    "Durability",
    "Expire",
    "ExpiryState",
    "Frame",
    "InputLog",
    "Log",
    "LoggedAck",
    "MissingCatalogue",
    "NewerCatalogue",
    "Open",
    "Operation",
    "Push",
    "SessionState",
    "Shape",
    "Stage",
    "Store",
    "StoreError",
    "StoredDataflow",
    "TransactionState",
    "WriteRefused",
    "arrow_records",
    "json_pairs",
    "read_frame",
]
