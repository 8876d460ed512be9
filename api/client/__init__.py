"""The Python client of the Frontier service: async and blocking."""

from api.client.client import (
    IDEMPOTENCY_KEY_REUSED,
    AsyncClient,
    AsyncSession,
    Client,
    FrontierConnectionError,
    FrontierError,
    Session,
)

__all__ = [
    "IDEMPOTENCY_KEY_REUSED",
    "AsyncClient",
    "AsyncSession",
    "Client",
    "FrontierConnectionError",
    "FrontierError",
    "Session",
]
