"""Inputs: how records from outside enter a dataflow.

``scope.new_input()`` returns an :class:`InputHandle` and the stream of what is sent through
it. The handle holds a capability at its current time: records are sent at that time, and
``advance_to`` moves it later, telling the dataflow that earlier times are complete here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.ports import OutputPort
from operators.progress import check_time, less_equal
from operators.runtime import Columns, Interest, Scope
from operators.stream import Stream

_BATCH = 1024
"""Single records sent with :meth:`InputHandle.send` are buffered into batches of this many."""


class InputClosed(RuntimeError):
    """The input was closed: nothing more can be sent through it."""


class InputHandle:
    """Sends records into a dataflow at its current time, and advances that time."""

    __slots__ = ("_buffer", "_capability", "_output")

    def __init__(self, output: OutputPort, capability: Capability) -> None:
        self._output = output
        self._capability: Capability | None = capability
        self._buffer: list[Any] = []

    @property
    def time(self) -> Hashable:
        """The current time: records sent now carry it."""
        return self._open().time

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._capability is None

    def _open(self) -> Capability:
        if self._capability is None:
            raise InputClosed("the input is closed")
        return self._capability

    def send(self, record: Any) -> None:
        """Send one record at the current time."""
        self._open()
        self._buffer.append(record)
        if len(self._buffer) >= _BATCH:
            self.flush()

    def send_batch(self, records: Iterable[Any] | Columns) -> None:
        """Send many records at the current time (copied: the caller may reuse its list).

        :class:`~operators.runtime.Columns` are sent as they are (they are immutable), and
        travel as columns as far as the operators downstream take them so.
        """
        capability = self._open()
        self.flush()
        batch = records if isinstance(records, Columns) else list(records)
        if batch:
            self._output.give_batch(capability, batch)
            self._output.operator.touch()

    def flush(self) -> None:
        """Send buffered single records now."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._output.give_batch(self._open(), batch)
            self._output.operator.touch()

    def advance_to(self, time: Hashable) -> None:
        """Move the current time to ``time``; an error if it is earlier than the current one."""
        capability = self._open()
        check_time(time)
        if not less_equal(capability.time, time):
            raise ValueError(
                f"cannot advance an input from {capability.time!r} to the earlier {time!r}"
            )
        self.flush()
        capability.downgrade(time)

    def close(self) -> None:
        """Send what is buffered and give up the capability: the input is complete."""
        if self._capability is None:
            return
        self.flush()
        self._capability.drop()
        self._capability = None


def new_input(scope: Scope, name: str = "Input") -> tuple[InputHandle, Stream]:
    """An input operator in ``scope``: the handle to send with, and its stream."""
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output()
    handles: list[InputHandle] = []

    def constructor(capabilities: list[Capability]) -> Callable[[], bool]:
        handles.append(InputHandle(output, capabilities[0]))
        return lambda: False  # all its work happens in the handle's calls

    builder.build(constructor, Interest.NEVER)
    handle = handles[0]
    scope.worker.on_finish(handle.close)
    return handle, stream
