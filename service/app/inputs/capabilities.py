"""An input's capabilities, and when what producers do takes effect on the dataflow.

The input operator lives on one worker (its *owner*) and holds the input's own capability;
each producer session holds one of its own, made from it. A record sent, or a capability
moved or dropped, is an *effect* on the dataflow: with a journal that defers them
(``durability: fsync``) an effect waits until the operation that made it is durable, so
nothing downstream ever shows what a crash could take back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from operators import Capability, OutputPort


class InputListener(Protocol):
    """Who hears that an input's frontier moved (its dataflow, which publishes it)."""

    def input_moved(self, name: str) -> None:
        """Input ``name``'s own capability moved or was dropped."""
        ...


class InputCapabilities:
    """The input's own capability, the sessions' capabilities, and the effects waiting."""

    __slots__ = ("_base", "_deferred", "_listener", "_name", "_output", "_position")

    def __init__(
        self,
        name: str,
        output: OutputPort,
        base: Capability,
        listener: InputListener,
        position: Callable[[], int],
        defer: bool,
    ) -> None:
        self._name = name
        self._output = output
        self._base: Capability | None = base
        """The input's own capability, as applied (``None`` once the close is)."""
        self._listener = listener
        self._position = position
        """The log position of the operation being applied (what an effect waits for)."""
        self._deferred: deque[tuple[int, Callable[..., Any], tuple[Any, ...]]] | None = (
            deque() if defer else None
        )
        """Effects waiting for their operations to be durable, in order, each with its
        operation's log position (``None``: effects happen at once)."""

    @property
    def base_time(self) -> Hashable:
        """The time of the input's own capability, as applied (the input is not closed)."""
        assert self._base is not None
        return self._base.time

    def applied_frontier(self) -> list[Hashable]:
        """The input's frontier as the dataflow sees it."""
        return [] if self._base is None else [self._base.time]

    def deferring(self, defer: bool) -> bool:
        """Defer effects from now on (or not); whether they were deferred before."""
        before = self._deferred is not None
        if defer and self._deferred is None:
            self._deferred = deque()
        elif not defer:
            self.apply_durable(1 << 62)
            self._deferred = None
        return before

    def session(self, time: Hashable) -> Capability:
        """A capability for a new session at ``time``.

        Made at once, deferred or not: holding a capability early only holds progress back.
        """
        assert self._base is not None  # the input is open: its close has not been applied
        return self._base.delayed(time)

    def effect(self, effect: Callable[..., Any], *args: Any) -> None:
        """Apply ``effect(*args)`` now, or once the operation being logged is durable."""
        deferred = self._deferred
        if deferred is None:
            effect(*args)
        else:
            deferred.append((self._position(), effect, args))

    def apply_durable(self, synced: int) -> None:
        """Apply the held effects of operations logged before position ``synced``, in order."""
        deferred = self._deferred
        while deferred and deferred[0][0] < synced:
            _, effect, args = deferred.popleft()
            effect(*args)

    def emit(self, batches: list[tuple[Hashable, list[Any]]]) -> None:
        """Send batches of records, each at its time (the capabilities allow it: checked)."""
        self.effect(self._emit, batches)

    def _emit(self, batches: list[tuple[Hashable, list[Any]]]) -> None:
        output = self._output
        for at, records in batches:
            output.send_at(at, records)
        output.operator.touch()

    def downgrade(self, capability: Capability, time: Hashable) -> None:
        """Move a session's capability to ``time``."""
        self.effect(capability.downgrade, time)

    def drop(self, capability: Capability) -> None:
        """Drop a session's capability."""
        self.effect(capability.drop)

    def move_base(self, time: Hashable) -> None:
        """Move the input's own capability to ``time``."""
        self.effect(self._downgrade_base, time)

    def close(self) -> None:
        """Drop the input's own capability: the input is complete."""
        self.effect(self._drop_base)

    def _downgrade_base(self, time: Hashable) -> None:
        base = self._base
        if base is not None:
            base.downgrade(time)
            self._listener.input_moved(self._name)

    def _drop_base(self) -> None:
        base, self._base = self._base, None
        if base is not None:
            base.drop()
            self._listener.input_moved(self._name)
