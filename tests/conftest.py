"""Shared test configuration: every async test runs on uvloop, as the service does."""

from collections.abc import Callable, Mapping
from typing import Any

import uvloop


def pytest_asyncio_loop_factories(config: Any, item: Any) -> Mapping[str, Callable[[], Any]]:
    """Run async tests on a uvloop event loop."""
    return {"uvloop": uvloop.new_event_loop}
