"""Capabilities: an operator's right to send records at a time on one of its outputs.

While a capability lives, no frontier downstream of its output can pass its time. It can be
cloned to a later time (:meth:`Capability.delayed`), moved to a later time in place
(:meth:`Capability.downgrade`), and dropped (:meth:`Capability.drop`). Every change is counted
in the operator's ``internals`` for its output, which the scope reports together with the
operator's consumed and produced counts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol

from operators.progress import ChangeBatch, Connectivity, less_equal, results_in


class Operator(Protocol):
    """What a capability needs of its operator: an :class:`~operators.core.OperatorCore`.

    Its name (for errors), which inputs reach which outputs (to grant capabilities), its
    outputs, and a way to have a change of capabilities published.
    """

    @property
    def name(self) -> str:
        """The operator's name."""
        ...

    @property
    def connectivity(self) -> Connectivity:
        """Per input, the outputs it reaches and their summaries."""
        ...

    @property
    def output_ports(self) -> Sequence[Output]:
        """The operator's outputs, by port number."""
        ...

    def touch(self) -> None:
        """Note that capabilities changed outside a run: publish them soon."""
        ...


class Output(Protocol):
    """What a capability needs of its output: an :class:`~operators.ports.OutputPort`."""

    @property
    def operator(self) -> Operator:
        """The operator the output belongs to."""
        ...

    @property
    def port(self) -> int:
        """The output's port number."""
        ...

    @property
    def internal(self) -> ChangeBatch[Hashable]:
        """The output's capability changes, which the operator publishes."""
        ...


class CapabilityError(RuntimeError):
    """A capability was misused: an earlier time, a dropped one, or the wrong output."""


class Capability:
    """The right to send at ``time`` on one output of one operator.

    Drop it (or let the last reference go) when done: a capability held forever keeps every
    downstream frontier at its time, and the dataflow never completes.
    """

    __slots__ = ("__weakref__", "_internal", "_output", "_time")

    def __init__(self, time: Hashable, output: Output, internal: ChangeBatch[Hashable]):
        self._time: Hashable | None = time
        self._output = output
        self._internal = internal
        internal.update(time, 1)
        output.operator.touch()

    @property
    def time(self) -> Hashable:
        """The time this capability allows sending at."""
        if self._time is None:
            raise CapabilityError("capability was dropped")
        return self._time

    @property
    def output(self) -> Output:
        """The output port this capability is for."""
        return self._output

    @property
    def dropped(self) -> bool:
        """Whether :meth:`drop` was called."""
        return self._time is None

    def delayed(self, time: Hashable) -> Capability:
        """A new capability for the same output at ``time``, which must not be earlier."""
        current = self.time
        if not less_equal(current, time):
            raise CapabilityError(
                f"cannot delay a capability at {current!r} to {time!r}: not later or equal"
            )
        return Capability(time, self._output, self._internal)

    def downgrade(self, time: Hashable) -> None:
        """Move this capability to the later (or equal) ``time``."""
        current = self.time
        if not less_equal(current, time):
            raise CapabilityError(
                f"cannot downgrade a capability at {current!r} to {time!r}: not later or equal"
            )
        if time != current:
            self._internal.update(time, 1)
            self._internal.update(current, -1)
            self._time = time
            self._output.operator.touch()

    def drop(self) -> None:
        """Give the capability up. Dropping twice is an error."""
        time = self.time
        self._internal.update(time, -1)
        self._time = None
        self._output.operator.touch()

    def __del__(self) -> None:
        # A capability nobody references can never be used again: release it, as timely
        # does on drop, so forgetting an explicit ``drop()`` cannot stall the dataflow.
        if self._time is not None:
            self._internal.update(self._time, -1)
            self._time = None
            self._output.operator.touch()

    def __repr__(self) -> str:
        shown = "dropped" if self._time is None else repr(self._time)
        return f"Capability({shown}, output={self._output.port})"


class InputCapability:
    """The capability that comes with a batch of input records: the batch's own time.

    It grants capabilities on the outputs its input reaches, at times at least the batch
    time advanced by the input-to-output summary. It is only valid while the operator
    handles the batch.
    """

    __slots__ = ("_input", "_operator", "time")

    def __init__(self, time: Hashable, input_port: int, operator: Operator) -> None:
        self.time = time
        self._input = input_port
        self._operator = operator

    def delayed(self, time: Hashable, output: int = 0) -> Capability:
        """A capability at ``time`` for ``output``, if the input's summary allows it."""
        operator = self._operator
        if not 0 <= output < len(operator.output_ports):
            raise CapabilityError(f"{operator.name}: there is no output {output}")
        summaries = operator.connectivity[self._input].get(output)
        if not summaries:
            raise CapabilityError(
                f"{operator.name}: input {self._input} does not reach output {output}, so its "
                "records grant no capability there"
            )
        for summary in summaries:
            least = results_in(summary, self.time)
            if least is not None and less_equal(least, time):
                port = operator.output_ports[output]
                return Capability(time, port, port.internal)
        raise CapabilityError(
            f"{operator.name}: a record at {self.time!r} on input {self._input} cannot grant a "
            f"capability at {time!r} on output {output} (summaries {list(summaries)!r})"
        )

    def retain(self, output: int = 0) -> Capability:
        """A capability at the batch's own time for ``output``."""
        return self.delayed(self.time, output)

    def __repr__(self) -> str:
        return f"InputCapability({self.time!r}, input={self._input})"
