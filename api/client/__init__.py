"""The Python client of the Frontier service: async and blocking.

:mod:`api.client.aio` is the asyncio client and its producer sessions,
:mod:`api.client.blocking` the same calls blocking (a loop thread of its own), and
:mod:`api.client.errors` what either raises.
"""

from api.client.aio import AsyncClient
from api.client.blocking import Client, Session
from api.client.errors import (
    IDEMPOTENCY_KEY_REUSED,
    FrontierConnectionError,
    FrontierError,
)
from api.client.session import AsyncSession

__all__ = [
    "IDEMPOTENCY_KEY_REUSED",
    "AsyncClient",
    "AsyncSession",
    "Client",
    "FrontierConnectionError",
    "FrontierError",
    "Session",
]
