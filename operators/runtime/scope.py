"""The handle a dataflow-building function gets: a scope under construction.

The runtime's :class:`Scope` knows the engine side (reserving operator slots, wiring edges,
nesting scopes); the operator layer registers a subclass that adds the stream-building
methods users call (``new_input``, ``feedback``, ...), so the engine never imports it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, TypeVar

from operators.runtime.subgraph import SubgraphBuilder
from operators.runtime.time_domain import IterativeRefinement, Refinement

if TYPE_CHECKING:
    from operators.runtime.worker import Worker

S = TypeVar("S", bound="Scope")


class Scope:
    """A scope being built on one worker (the root scope of a dataflow, or a nested one)."""

    def __init__(
        self, builder: SubgraphBuilder, parent: Scope | None = None, index: int = 0
    ) -> None:
        self.builder = builder
        self.parent = parent
        self.index_in_parent = index
        """This scope's child index in its parent (0 for a dataflow's root)."""

    @property
    def worker(self) -> Worker:
        """The worker building this scope."""
        return self.builder.worker

    @property
    def index(self) -> int:
        """The worker's index, ``0 <= index < peers``."""
        return self.builder.worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.builder.worker.peers

    @property
    def minimum(self) -> Hashable:
        """The least time of this scope's time domain."""
        return self.builder.domain.minimum

    @property
    def identity(self) -> Hashable:
        """The identity summary of this scope's time domain."""
        return self.builder.domain.identity

    @property
    def depth(self) -> int:
        """How deeply nested this scope is (0 for a dataflow's root)."""
        return len(self.builder.path) - 1

    def iterative(self: S, name: str = "Iterative") -> S:
        """Open a nested scope whose times are ``Product(outer, inner)``."""
        return self._nest(name, iterative=True)

    def region(self: S, name: str = "Region") -> S:
        """Open a nested scope with this scope's own times (structure only)."""
        return self._nest(name, iterative=False)

    def _nest(self: S, name: str, iterative: bool) -> S:
        parent = self.builder
        index = parent.reserve()
        domain = parent.domain.product() if iterative else parent.domain
        refinement = IterativeRefinement() if iterative else Refinement()
        child = SubgraphBuilder(
            parent.worker,
            (*parent.path, index),
            domain,
            refinement,
            parent.activator(index),
            name=name,
        )
        parent.place(index, child)
        return type(self)(child, self, index)

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None
