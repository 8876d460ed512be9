"""A deployer's operator for the explain tests: ``stall`` leaves records in flight to it.

While :data:`STALLED` holds a value, ``stall`` does not read its input (exchanged by the
record's value), so what was sent to it stays counted on the edge into it; once it is
cleared, the next schedule (a frontier change) passes everything on.
"""

from collections.abc import Callable
from typing import Any

from operators import Stream
from operators.graph import OpKind

STALLED: list[bool] = [True]


def _stall(inputs: list[Stream], _params: dict[str, Any]) -> list[Stream]:
    def constructor(capability: Any, _core: Any) -> Any:
        capability.drop()

        def logic(input: Any, output: Any) -> None:
            if STALLED:
                return
            for time, records in input.batches():
                output.forward(time, records)

        return logic

    return [inputs[0].unary_frontier(constructor, name="Stall", exchange=lambda r: r)]


def register_operators(register: Callable[[OpKind], None]) -> None:
    """Offer ``stall``."""
    register(OpKind("stall", 1, 1, builder=_stall))
