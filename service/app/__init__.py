"""The service core: dataflows created from graphs, producers feeding them, outputs read out.

Everything here is plain Python on the event loop the workers run on; the HTTP and WebSocket
edges in :mod:`api` translate requests into calls on :class:`DataflowManager`.
"""

from service.app.errors import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    LimitExceeded,
    NotFound,
    ServiceError,
    Unauthorized,
)
from service.app.manager import DataflowManager, DataflowRecord
from service.app.settings import Limits, Settings

__all__ = [
    "Conflict",
    "DataflowManager",
    "DataflowRecord",
    "Forbidden",
    "Gone",
    "Invalid",
    "LimitExceeded",
    "Limits",
    "NotFound",
    "ServiceError",
    "Settings",
    "Unauthorized",
]
