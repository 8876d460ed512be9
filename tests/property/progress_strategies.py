"""Strategies and naive models shared by the progress-tracking property tests.

Time domains are described by a *shape*: ``"int"``, or a pair ``(outer, inner)`` of shapes
for a (possibly nested) ``Product``. Graphs are drawn as a :class:`GraphSpec`, whose ``repr``
is the Python that rebuilds the graph, so a falsifying example can be pasted and rerun.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from operators.progress import MAX_TIME, Antichain, Builder, Product, Source, Target

BIG = 2**63
"""A summary two of which overflow (``BIG + BIG > MAX_TIME``), but one does not."""

# --------------------------------------------------------------------------- time domains

Shape = Any  # "int" | tuple[Shape, Shape]

shapes = st.recursive(st.just("int"), lambda inner: st.tuples(inner, inner), max_leaves=4)
"""Time domains: ints, Products, and Products nested on either side (up to four leaves)."""

small_ints = st.integers(0, 3)
"""Leaves for order properties: small, so that comparable and equal pairs are common."""

wide_ints = st.one_of(
    st.integers(0, 4),
    st.integers(0, MAX_TIME),
    st.integers(MAX_TIME - 4, MAX_TIME),
    st.integers(BIG - 3, BIG + 3),
)
"""Leaves for summary properties: small, anywhere in range, and near the overflow points."""


def of_shape(shape: Shape, leaf: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """Times (or summaries) of one domain, with integer leaves drawn from ``leaf``."""
    if shape == "int":
        return leaf
    return st.builds(Product, of_shape(shape[0], leaf), of_shape(shape[1], leaf))


def naive_le(a: Any, b: Any) -> bool:
    """The product partial order, straight from its definition."""
    if isinstance(a, Product):
        return naive_le(a.outer, b.outer) and naive_le(a.inner, b.inner)
    return a <= b


def leaves(t: Any) -> list[int]:
    """The integer leaves of a time or summary, outer before inner."""
    if isinstance(t, Product):
        return leaves(t.outer) + leaves(t.inner)
    return [t]


def naive_add(summary: Any, time: Any) -> Any:
    """Leaf-wise sum, or ``None`` when any leaf passes ``MAX_TIME``."""
    if isinstance(time, Product):
        outer = naive_add(summary.outer, time.outer)
        inner = naive_add(summary.inner, time.inner)
        return None if outer is None or inner is None else Product(outer, inner)
    total = time + summary
    return total if total <= MAX_TIME else None


def minimal(times: Iterable[Hashable]) -> set[Hashable]:
    """The minimal elements of a set of times, by brute force."""
    distinct = set(times)
    return {t for t in distinct if not any(u != t and naive_le(u, t) for u in distinct)}


# --------------------------------------------------------------------------- graphs

Row = tuple[tuple[int, tuple[Hashable, ...]], ...]
"""One input's connectivity: ``(output, summaries)`` pairs (summaries not yet minimised)."""


@dataclass(frozen=True)
class Operator:
    node: int
    inputs: int
    outputs: int
    connectivity: tuple[Row, ...]


@dataclass(frozen=True)
class GraphSpec:
    """A scope: node 0 (with its scope inputs and outputs), operators and edges."""

    identity: Hashable
    scope_inputs: int  # node 0's sources
    scope_outputs: int  # node 0's targets
    operators: tuple[Operator, ...]
    edges: tuple[tuple[Source, Target], ...]

    def builder(self) -> Builder:
        builder = Builder(identity=self.identity)
        builder.add_node(0, self.scope_outputs, self.scope_inputs)
        for op in self.operators:
            connectivity = [{o: Antichain(s) for o, s in row} for row in op.connectivity]
            builder.add_node(op.node, op.inputs, op.outputs, connectivity)
        for source, target in self.edges:
            builder.add_edge(source, target)
        return builder

    def nodes(self) -> list[tuple[Target, Source, Hashable]]:
        """Internal connections for the reference, from the spec (not from the Builder)."""
        return [
            (Target(op.node, i), Source(op.node, o), summary)
            for op in self.operators
            for i, row in enumerate(op.connectivity)
            for o, summaries in row
            for summary in summaries
        ]

    def locations(self) -> list[Target | Source]:
        found: list[Target | Source] = [Target(0, i) for i in range(self.scope_outputs)]
        found += [Source(0, o) for o in range(self.scope_inputs)]
        for op in self.operators:
            found += [Target(op.node, i) for i in range(op.inputs)]
            found += [Source(op.node, o) for o in range(op.outputs)]
        return found

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints falsifying examples with this hook (else field by field).
        printer.text(repr(self))

    def __repr__(self) -> str:
        lines = [
            f"builder = Builder(identity={self.identity!r})",
            f"builder.add_node(0, {self.scope_outputs}, {self.scope_inputs})",
        ]
        for op in sorted(self.operators, key=lambda op: op.node):
            rows = ", ".join(
                "{" + ", ".join(f"{o}: Antichain({list(s)!r})" for o, s in row) + "}"
                for row in op.connectivity
            )
            lines.append(f"builder.add_node({op.node}, {op.inputs}, {op.outputs}, [{rows}])")
        lines += [f"builder.add_edge({s!r}, {t!r})" for s, t in self.edges]
        return "\n".join(["", *lines, ""])


INT_SUMMARIES = st.sampled_from([0, 1, 2, 0, 1, BIG])
INT_ADVANCING = st.sampled_from([1, 2, 1, BIG])
PRODUCT_SUMMARIES = st.builds(Product, st.integers(0, 2), st.integers(0, 2))
PRODUCT_ADVANCING = st.one_of(
    st.just(Product(0, 1)), PRODUCT_SUMMARIES.filter(lambda s: s != Product(0, 0))
)

INT_TIMES = st.sampled_from([0, 1, 2, 3, 4, 5, 6, BIG - 1, BIG, MAX_TIME - 1, MAX_TIME])
PRODUCT_TIMES = st.builds(
    Product, st.sampled_from([0, 1, 2, 3, MAX_TIME]), st.sampled_from([0, 1, 2, 3, MAX_TIME])
)


def times_for(kind: str) -> st.SearchStrategy[Hashable]:
    """Pointstamp times for a graph of ``kind`` ("int" or "product")."""
    return INT_TIMES if kind == "int" else PRODUCT_TIMES


@st.composite
def graphs(draw: st.DrawFn, kind: str, cycles: str, plant_cycle: bool = False) -> GraphSpec:
    """Small random scopes with sparse connectivity.

    ``cycles`` is ``"none"`` (acyclic), ``"sound"`` (cycles only re-enter an operator whose
    every summary strictly advances, so every cycle crosses one; one such loop through one to
    three operators is always planted), or ``"any"`` (back edges into any operator: cycles may
    not advance). With ``"any"``, ``plant_cycle`` adds a loop of identity connections and
    edges through one to three operators, so the graph is surely unsound.

    Operators are generated in a topological order (forward edges only go from earlier to
    later positions) and then given node ids by a random permutation, so that the tracker's
    location order is unrelated to the data flow.
    """
    identity: Hashable = 0 if kind == "int" else Product(0, 0)
    summaries = INT_SUMMARIES if kind == "int" else PRODUCT_SUMMARIES
    advancing = INT_ADVANCING if kind == "int" else PRODUCT_ADVANCING

    n = draw(st.integers(1, 7), label="operators")
    ids = draw(st.permutations(range(1, n + 1)), label="node ids")
    scope_inputs = draw(st.integers(0, 2), label="scope inputs")
    scope_outputs = draw(st.integers(0, 2), label="scope outputs")
    planted: list[int] = []
    if plant_cycle or cycles == "sound":
        planted = sorted(
            draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True), label="loop")
        )

    operators: list[Operator] = []
    feedback: list[bool] = []
    for k in range(n):
        inputs = draw(st.integers(0, 2))
        outputs = draw(st.integers(0, 2))
        if k in planted:
            inputs, outputs = max(inputs, 1), max(outputs, 1)
        # In a sound graph, a planted loop re-enters its first (lowest) position.
        is_feedback = cycles == "sound" and (k == planted[0] or draw(st.booleans()))
        rows = []
        for i in range(inputs):
            row = []
            for o in range(outputs):
                forced = k in planted and (i, o) == (0, 0)
                if not forced and not draw(st.booleans()):
                    continue  # sparse: this input does not reach this output
                chosen = draw(
                    st.lists(
                        advancing if is_feedback else summaries, min_size=1, max_size=2, unique=True
                    )
                )
                if forced and cycles == "any" and identity not in chosen:
                    chosen = [identity, *chosen[:1]]
                row.append((o, tuple(chosen)))
            rows.append(tuple(row))
        operators.append(Operator(ids[k], inputs, outputs, tuple(rows)))
        feedback.append(is_feedback)

    def sources_at(positions: Iterable[int]) -> list[Source]:
        return [Source(ids[k], o) for k in positions for o in range(operators[k].outputs)]

    scope_sources = [Source(0, p) for p in range(scope_inputs)]
    edges: list[tuple[Source, Target]] = []
    for k in range(n):
        forward = scope_sources + sources_at(range(k))
        backward = sources_at(range(k, n))
        may_loop = cycles == "any" or (cycles == "sound" and feedback[k])
        for i in range(operators[k].inputs):
            for _ in range(draw(st.integers(0, 2))):
                pool = forward
                if backward and may_loop and (not forward or draw(st.booleans())):
                    pool = backward
                if pool:
                    edges.append((draw(st.sampled_from(pool)), Target(ids[k], i)))
    every_source = scope_sources + sources_at(range(n))
    for o in range(scope_outputs):
        if every_source:
            feeding = draw(st.lists(st.sampled_from(every_source), max_size=2))
            edges.extend((source, Target(0, o)) for source in feeding)
    for j, k in enumerate(planted):
        after = planted[(j + 1) % len(planted)]
        edges.append((Source(ids[k], 0), Target(ids[after], 0)))

    return GraphSpec(identity, scope_inputs, scope_outputs, tuple(operators), tuple(edges))
