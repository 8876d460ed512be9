"""Fixtures of the service tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from service.app import DataflowManager, Limits, Settings
from tests.service.support import Start


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Start managers on demand; every one started is stopped, even when the test fails."""
    started: list[DataflowManager] = []

    async def make(workers: int = 1, **limits: int) -> DataflowManager:
        manager = DataflowManager(Settings(workers=workers, limits=Limits(**limits)))
        started.append(manager)
        await manager.start()
        return manager

    try:
        yield make
    finally:
        for manager in reversed(started):
            await manager.stop()
