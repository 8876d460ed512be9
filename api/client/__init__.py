"""The Python client of the Frontier service: async and blocking."""

from api.client.client import AsyncClient, AsyncSession, Client, FrontierError, Session

__all__ = ["AsyncClient", "AsyncSession", "Client", "FrontierError", "Session"]
