"""``ok_err``: split a stream by a function that returns :class:`Ok` or :class:`Err`.

``Ok`` and ``Err`` play the part of Rust's ``Result`` in timely's ``ok_err``::

    oks, errs = stream.ok_err(lambda x: Ok(x) if x >= 0 else Err(f"negative: {x}"))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach

T = TypeVar("T")
E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class Ok(Generic[T]):
    """A success: ``value`` goes to the first stream of :func:`ok_err`.

    >>> Ok(3).value
    3
    """

    value: T


@dataclass(frozen=True, slots=True)
class Err(Generic[E]):
    """A failure: ``error`` goes to the second stream of :func:`ok_err`.

    >>> Err("bad").error
    'bad'
    """

    error: E


@attach(Stream.ok_err)
def ok_err(
    stream: Stream, fn: Callable[[Any], Ok[Any] | Err[Any]], name: str = "OkErr"
) -> tuple[Stream, Stream]:
    """Split ``stream`` by ``fn``: the values of its ``Ok`` results, the errors of its ``Err``.

    Args:
        stream: The records to split.
        fn: Maps each record to ``Ok(value)`` or ``Err(error)``.
        name: The operator's name.

    Returns:
        ``(oks, errs)``: the ``value`` of every ``Ok`` and the ``error`` of every ``Err``,
        each at its record's time.

    Raises:
        TypeError: When running, if ``fn`` returns anything but an ``Ok`` or an ``Err``.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    ok_output, oks = builder.new_output()
    err_output, errs = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, records in input.batches():
                values: list[Any] = []
                errors: list[Any] = []
                for record in records:
                    result: object = fn(record)
                    if isinstance(result, Ok):
                        values.append(result.value)
                    elif isinstance(result, Err):
                        errors.append(result.error)
                    else:
                        raise TypeError(
                            f"{name}: the function must return Ok or Err, "
                            f"not {type(result).__name__}"
                        )
                ok_output.forward(time, values)
                err_output.forward(time, errors)

        return logic

    builder.build_reactive(constructor)
    return oks, errs
