"""``enter`` and ``leave``: move a stream into a nested scope and back out.

Entering converts times to the inner scope's (``t`` becomes ``Product(t, 0)`` in an iterative
scope), leaving converts them back. Records cross on their own worker; the nested scope
counts what enters (to report it consumed) and its inner operators count what leaves.
"""

from __future__ import annotations

from operators.progress import Source, Target
from operators.runtime import Scope
from operators.stream import Stream, attach


@attach(Stream.enter)
def enter(stream: Stream, scope: Scope) -> Stream:
    """Bring ``stream`` into ``scope``, which must be nested directly in the stream's scope."""
    parent = scope.parent
    if parent is None or parent.builder is not stream.scope.builder:
        raise ValueError("enter() needs a scope nested directly in the stream's own scope")
    inner = scope.builder
    port = inner.new_input(stream.tee, parent.builder, scope.index_in_parent)
    parent.builder.add_edge(stream.source, Target(scope.index_in_parent, port))
    return Stream(scope, Source(0, port), inner.input_tee(port))


@attach(Stream.leave)
def leave(stream: Stream) -> Stream:
    """Take ``stream`` out of its nested scope into the parent scope."""
    scope = stream.scope
    parent = scope.parent
    if parent is None:
        raise ValueError("leave() needs a nested scope: this stream is in a dataflow's root")
    inner = scope.builder
    port, outer_tee = inner.new_output()
    stream.tee.pushers.append(inner.egress(port))
    inner.add_edge(stream.source, Target(0, port))
    return Stream(parent, Source(scope.index_in_parent, port), outer_tee)
