"""What the service tests share: starting managers, and waiting on the workers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from service.app import DataflowManager

Start = Callable[..., Awaitable[DataflowManager]]
"""The ``start`` fixture: ``await start(workers=1, **limits)`` is a running manager."""


async def until(condition: Callable[[], bool], what: str, turns: int = 2_000) -> None:
    """Yield to the loop until ``condition()`` holds; fail after ``turns`` turns."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"timed out waiting until {what}")


async def settle(turns: int = 100) -> None:
    """Let the workers run for a while (to show that something does *not* happen)."""
    for _ in range(turns):
        await asyncio.sleep(0)
