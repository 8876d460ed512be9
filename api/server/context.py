"""What every handler shares: the application's keys and the open sockets.

A module of its own so that the resource modules and :mod:`api.server.app` (which routes
to them) import it, and not each other.
"""

from __future__ import annotations

import weakref

from aiohttp import web

from service.app import DataflowManager, Settings


class OpenSockets:
    """The WebSockets currently open, so shutdown can close them with "going away"."""

    def __init__(self) -> None:
        self.open: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()
        self.producers: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()


SERVER = "frontier"
"""The ``Server`` header of every response: the product, and nothing about its parts."""

MANAGER = web.AppKey("manager", DataflowManager)
SETTINGS = web.AppKey("settings", Settings)
SOCKETS = web.AppKey("sockets", OpenSockets)
TENANT = web.RequestKey("tenant", str)


def manager_of(request: web.Request) -> DataflowManager:
    """The application's dataflow manager."""
    return request.app[MANAGER]


def tenant_of(request: web.Request) -> str:
    """The authenticated tenant (set by the auth middleware)."""
    return request[TENANT]
