"""The contract between an operator and the scope that hosts it (seeds 003 and 004).

An operator tells its scope, once, how many inputs and outputs it has, how records at each
input may emerge at each output (its *internal summary*, as a connectivity of summary
antichains), and which capabilities it starts with. The scope tells it, once, the paths from
its outputs back to its inputs outside it (its *external summary*). At run time the scope
*pushes* frontier changes at the operator's inputs into ``SharedProgress.frontiers``, and
after each ``schedule()`` *pulls* what the operator consumed, produced, and how its
capabilities changed (``consumeds``, ``produceds``, ``internals``), all three together:
a consumption and the capability it grants, a production and the capability that backs it,
must be reported in the same pull or the frontiers computed from them could pass a time that
still has work.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol

from operators.progress import ChangeBatch, Connectivity


class Interest(enum.Enum):
    """When a change to an operator's input frontier should schedule it."""

    NEVER = "never"
    """Frontier changes never wake it (pure record-at-a-time operators like ``map``)."""
    IF_CAPABILITY = "if_capability"
    """Wake it on a frontier change only while it holds some capability."""
    ALWAYS = "always"
    """Wake it on every frontier change (notificators, probes, sinks that flush)."""


@dataclass(slots=True)
class SharedProgress:
    """Progress exchanged between an operator and its scope, one batch per port.

    ``frontiers`` are written by the scope and drained by the operator; ``consumeds``,
    ``internals`` and ``produceds`` are written by the operator and drained by the scope
    after every schedule. Times are the operator's own (its scope's) times.
    """

    frontiers: list[ChangeBatch[Hashable]] = field(default_factory=list)
    consumeds: list[ChangeBatch[Hashable]] = field(default_factory=list)
    internals: list[ChangeBatch[Hashable]] = field(default_factory=list)
    produceds: list[ChangeBatch[Hashable]] = field(default_factory=list)

    @classmethod
    def for_ports(cls, inputs: int, outputs: int) -> SharedProgress:
        """Empty batches for ``inputs`` input ports and ``outputs`` output ports."""
        return cls(
            [ChangeBatch() for _ in range(inputs)],
            [ChangeBatch() for _ in range(inputs)],
            [ChangeBatch() for _ in range(outputs)],
            [ChangeBatch() for _ in range(outputs)],
        )


class Operate(Protocol):
    """What a scope needs from each operator it hosts (a nested scope is one too).

    ``initialize`` is called once, when the scope is built. It returns the internal summary
    and the shared progress, whose ``internals`` must already hold the initial capabilities:
    by convention ``(minimum, peers)`` per output for an operator that exists on every
    worker, since each worker assumes every worker starts with one capability per output
    and each retracts its own. These initial counts are applied by every worker locally,
    never broadcast.
    """

    name: str
    interest: Interest

    @property
    def inputs(self) -> int:
        """The number of input ports."""
        ...

    @property
    def outputs(self) -> int:
        """The number of output ports."""
        ...

    @property
    def local(self) -> bool:
        """Whether its progress must be broadcast to other workers by the host scope.

        ``False`` for nested scopes: they broadcast inside and report global totals.
        """
        ...

    def initialize(self) -> tuple[Connectivity, SharedProgress]:
        """Return the internal summary and the shared progress (with initial capabilities)."""
        ...

    def set_external_summary(self, summary: Connectivity) -> None:
        """Receive the paths from each of its outputs back to each of its inputs outside it."""
        ...

    def schedule(self) -> bool:
        """Do some work; return whether the operator is still incomplete (keep it alive)."""
        ...
