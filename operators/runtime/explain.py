"""Why a time is not complete at a location: the pointstamps behind it, across nested scopes.

A scope's tracker explains its own locations (:meth:`~operators.progress.Tracker.holders`).
Two kinds of pointstamp are the work of another scope, and are explained there in turn:

* a **nested scope's capability** at one of its outputs (``Source(scope, o)`` in the
  parent) is the projection of the pointstamps inside it that reach the scope's output
  ``Target(0, o)``: those inner pointstamps are its :attr:`Blocker.inner`, with an inner
  time whose outer part reaches the location at or before the time explained;
* the **parent's frontier at a scope input**, a pointstamp at ``Source(0, p)`` inside, is
  held by the parent's pointstamps that reach the scope's input ``Target(scope, p)``: when
  a location inside a nested scope is explained, those are its :attr:`Blocker.inner`.

Every worker's trackers see every worker's pointstamps (progress is broadcast), so one
worker's scopes answer for the whole dataflow. Nothing is copied: each answer is read from
the trackers' counts and reachability as they are now.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial

from operators.progress import Holder, Location, Source, Target, less_equal, results_in
from operators.runtime.subgraph import Subgraph

Admits = Callable[[Hashable], bool]


@dataclass(frozen=True, slots=True)
class Blocker:
    """One pointstamp holding a time back, in the scope at ``path``.

    ``inner`` explains it further: for a nested scope's capability, the pointstamps inside
    the scope behind it; for a scope input's pointstamp inside a scope, the parent's
    pointstamps behind the scope's input.
    """

    path: tuple[int, ...]
    """The path of the scope the holder is in (a dataflow's root is ``(index,)``)."""
    holder: Holder
    inner: tuple[Blocker, ...] = ()


def _at_most(bound: Hashable, time: Hashable) -> bool:
    return less_equal(time, bound)


def explain(scopes: Sequence[Subgraph], location: Location, time: Hashable) -> list[Blocker]:
    """Every pointstamp that holds ``time`` back at ``location`` of the innermost scope.

    ``scopes`` are the dataflow's root and the scopes nested in it down to the one that
    holds ``location`` (``time`` is of that scope's domain). The answer is empty exactly
    when ``time`` is complete there.
    """
    return _explain(list(scopes), location, partial(_at_most, time), inside=False)


def is_complete(scope: Subgraph, location: Location, time: Hashable) -> bool:
    """Whether no time at or before ``time`` can still reach ``location``."""
    return not any(less_equal(f, time) for f in scope.frontier(location))


def _explain(
    chain: list[Subgraph], location: Location, admits: Admits, inside: bool
) -> list[Blocker]:
    """The blockers at ``location`` of ``chain[-1]`` whose arriving time ``admits`` takes.

    ``inside``: explaining a nested scope's output for its parent, so the parent's frontier
    at the scope's inputs (node 0's sources) is left out, as the scope leaves it out of the
    capabilities it reports.
    """
    scope = chain[-1]
    skip: tuple[Location, ...] = tuple(Source(0, p) for p in range(scope.inputs)) if inside else ()
    holders = scope.tracker.holders(location, admits, scope.domain.minimum, skip)
    nested: dict[Location, list[Blocker]] = {}
    result: list[Blocker] = []
    for holder in holders:
        at = holder.location
        inner: tuple[Blocker, ...] = ()
        if isinstance(at, Source) and at.node == 0 and len(chain) > 1:
            inner = tuple(_outside(chain, holder, admits))
        elif isinstance(at, Source) and isinstance(child := scope.child(at.node), Subgraph):
            if at not in nested:
                nested[at] = _inside(chain, child, holder, admits)
            projected = child.refinement.to_outer
            inner = tuple(
                b
                for b in nested[at]
                if _first_at_or_before(holders, at, projected(_leaves_at(b))) is holder
            )
        result.append(Blocker(scope.path, holder, inner))
    return result


def _leaves_at(blocker: Blocker) -> Hashable:
    return blocker.holder.arrives


def _first_at_or_before(holders: list[Holder], at: Location, time: Hashable) -> Holder | None:
    """The first holder at ``at`` whose time is at or before ``time`` (else the first at it)."""
    first = None
    for holder in holders:
        if holder.location == at:
            if less_equal(holder.time, time):
                return holder
            first = first or holder
    return first


def _inside(
    chain: list[Subgraph], child: Subgraph, holder: Holder, admits: Admits
) -> list[Blocker]:
    """What inside ``child`` holds its capability ``holder`` (at one of its outputs).

    An inner time ``u`` reaching the scope's output leaves it at ``to_outer(u)``, which the
    parent's summaries from that output carry on to the location ``admits`` is about.
    """
    to_outer = child.refinement.to_outer
    summaries = holder.summaries

    def inner_admits(inner: Hashable) -> bool:
        outer = to_outer(inner)
        return any((moved := results_in(s, outer)) is not None and admits(moved) for s in summaries)

    port = holder.location.port
    return _explain([*chain, child], Target(0, port), inner_admits, inside=True)


def _outside(chain: list[Subgraph], holder: Holder, admits: Admits) -> list[Blocker]:
    """What in the parent holds back a scope input whose frontier ``holder`` is."""
    scope = chain[-1]
    to_inner = scope.refinement.to_inner
    summaries = holder.summaries

    def outer_admits(outer: Hashable) -> bool:
        inner = to_inner(outer)
        return any((moved := results_in(s, inner)) is not None and admits(moved) for s in summaries)

    return _explain(chain[:-1], Target(scope.path[-1], holder.location.port), outer_admits, False)
