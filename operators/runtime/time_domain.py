"""Time domains of scopes, and how a nested scope's times refine its parent's.

The root scope of a dataflow uses integer times. ``iterative()`` nests a scope whose times
are ``Product(outer, inner)``: entering appends an inner coordinate at its minimum, leaving
drops it, and an inner path summary is seen outside as its outer coordinate alone (seed 004's
``Refines``). ``region()`` nests a scope with the parent's own times.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from operators.progress import Product


@dataclass(frozen=True, slots=True)
class TimeDomain:
    """The minimum time and the identity summary of a scope's times."""

    minimum: Hashable
    identity: Hashable

    def product(self) -> TimeDomain:
        """The domain of an iterative scope nested in one with this domain."""
        return TimeDomain(Product(self.minimum, 0), Product(self.identity, 0))


INTEGERS = TimeDomain(0, 0)
"""The root scope's domain: integers ``0 <= t < 2**64``, summaries "add k"."""


class Refinement:
    """How times and summaries cross the boundary of a nested scope.

    The base class is the identity (a ``region``); :class:`IterativeRefinement` is the
    product refinement of an ``iterative`` scope.
    """

    __slots__ = ()

    def to_inner(self, time: Hashable) -> Hashable:
        """The inner time of a record entering at outer ``time``."""
        return time

    def to_outer(self, time: Hashable) -> Hashable:
        """The outer time of a record leaving at inner ``time``."""
        return time

    def summarize(self, summary: Hashable) -> Hashable:
        """An inner path summary as seen from outside: never more aggressive than it."""
        return summary


class IterativeRefinement(Refinement):
    """``Product(outer, inner)`` times: enter at ``(t, 0)``, leave as ``t``."""

    __slots__ = ()

    def to_inner(self, time: Hashable) -> Hashable:
        """Append the inner coordinate at its minimum."""
        return Product(time, 0)

    def to_outer(self, time: Hashable) -> Hashable:
        """Drop the inner coordinate."""
        assert isinstance(time, Product)
        outer: Hashable = time.outer
        return outer

    def summarize(self, summary: Hashable) -> Hashable:
        """Only the outer coordinate of an inner summary is visible outside."""
        assert isinstance(summary, Product)
        outer: Hashable = summary.outer
        return outer
