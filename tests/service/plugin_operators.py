"""A deployer's operator module, as ``Settings.operator_modules`` would name it (for tests)."""

from collections.abc import Callable
from typing import Any

from operators import Stream
from operators.graph import OpKind, Param


def _shout(inputs: list[Stream], params: dict[str, Any]) -> list[Stream]:
    suffix = "!" * params.get("marks", 1)
    return [inputs[0].map(lambda r: str(r).upper() + suffix)]


def register_operators(register: Callable[[OpKind], None]) -> None:
    """Offer ``shout``: records as upper-case strings with exclamation marks."""
    register(
        OpKind(
            "shout",
            1,
            1,
            {"marks": Param("int", required=False, minimum=1, maximum=5)},
            builder=_shout,
        )
    )
