"""Shared test configuration: every async test runs on uvloop, as the service does.

Hypothesis tests check what is computed, never how fast: its per-example deadline and its
too-slow health check are off everywhere, since a shared 2-CPU machine (or a CI runner) can
stall any example for longer than their defaults allow.
"""

from collections.abc import Callable, Mapping
from typing import Any

import uvloop
from hypothesis import HealthCheck, settings

settings.register_profile("frontier", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("frontier")


def pytest_asyncio_loop_factories(config: Any, item: Any) -> Mapping[str, Callable[[], Any]]:
    """Run async tests on a uvloop event loop."""
    return {"uvloop": uvloop.new_event_loop}
