"""A deployer's operator that blocks the event loop (for tests of what a stall shows).

``stall`` passes records through; a record ``{"sleep": s}`` first sleeps ``s`` seconds
(at most 10) in the worker, with ``time.sleep``: the event loop runs nothing meanwhile,
as with any blocking call in a deployer's operator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from operators import Stream
from operators.graph import OpKind


def _pass(record: Any) -> Any:
    if isinstance(record, dict) and isinstance(record.get("sleep"), int | float):
        time.sleep(min(float(record["sleep"]), 10.0))
    return record


def _stall(inputs: list[Stream], params: dict[str, Any]) -> list[Stream]:
    return [inputs[0].map(_pass)]


def register_operators(register: Callable[[OpKind], None]) -> None:
    """Offer ``stall``: records pass; ``{"sleep": s}`` blocks the worker for ``s`` seconds."""
    register(OpKind("stall", 1, 1, {}, builder=_stall))
