"""The HTTP and WebSocket server (aiohttp on uvloop)."""

from api.server.app import create_app

__all__ = ["create_app"]
