"""``feedback``: the one operator whose input is connected after its output exists.

``scope.feedback(summary)`` returns a :class:`LoopHandle` and a stream; later,
``stream.connect_loop(handle)`` closes the cycle. Every record that goes around is
advanced by ``summary``; a record whose time would overflow is dropped, which ends a loop at
the end of time. The summary must advance time (``Product(0, 1)`` in an iterative scope),
or the cycle is refused when the dataflow is built.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from operators.builder import OperatorBuilder
from operators.ports import InputPort, OutputPort
from operators.progress import is_identity, results_in
from operators.runtime import Interest, Scope
from operators.stream import Stream


class LoopHandle:
    """The not-yet-connected input of a feedback operator."""

    __slots__ = ("_builder", "_connected", "_output", "_summary")

    def __init__(self, builder: OperatorBuilder, output: OutputPort, summary: Hashable) -> None:
        self._builder = builder
        self._output = output
        self._summary = summary
        self._connected = False

    def connect(self, stream: Stream) -> None:
        """Feed ``stream`` into the loop (once)."""
        if self._connected:
            raise RuntimeError("this feedback handle is already connected")
        self._connected = True
        builder = self._builder
        input = builder.new_input(stream, connection={0: self._summary})
        _install(builder, input, self._output, self._summary)


def _install(
    builder: OperatorBuilder, input: InputPort, output: OutputPort, summary: Hashable
) -> None:
    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for capability, batch in input.held_containers():  # columns stay columns
                advanced = results_in(summary, capability.time)
                if advanced is not None:
                    output.give_batch(capability.delayed(advanced), batch)

        return logic

    builder.build_reactive(constructor, Interest.NEVER)


def feedback(scope: Scope, summary: Hashable, name: str = "Feedback") -> tuple[LoopHandle, Stream]:
    """A feedback operator in ``scope`` advancing records by ``summary``."""
    if is_identity(summary):
        raise ValueError(
            f"a feedback summary must advance time, and {summary!r} does not: "
            "the loop could carry records back to the same time"
        )
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output(connection={0: summary})
    return LoopHandle(builder, output, summary), stream
