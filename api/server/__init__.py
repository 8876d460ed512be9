"""The HTTP and WebSocket server (aiohttp on uvloop)."""

from api.server.app import create_app, run_server

__all__ = ["create_app", "run_server"]
