"""The graph compiler: checks what a graph means, and builds it into a dataflow.

:func:`compile_graph` takes a shape-checked :class:`~operators.graph.spec.GraphSpec` and
checks everything else at once: known operators and their parameters, ports that exist and
are connected exactly once, scopes, expressions (compiled here, once), and cycles that do not
advance time. The resulting :class:`Plan` builds the same dataflow on every worker; inputs and
outputs are supplied by a :class:`GraphContext` (the service attaches producers and captures
there).

Records are JSON values. An expression that fails on a record (a missing field, a wrong type)
drops that record and counts it against its node, unless the node says ``"on_error":
"fail"``, in which case the dataflow fails with the error.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol

from operators.capture.event import EventFormatError, decode_time
from operators.graph.cel import (
    EvaluationError,
    Expression,
    ExpressionError,
    compile_expression,
    hashable,
)
from operators.graph.spec import GraphError, GraphSpec, NodeSpec, Problem, escape
from operators.stream import Stream
from service.progress import Antichain, Builder, Product, check_time, less_equal

# --------------------------------------------------------------------------- the catalogue


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter of an operator kind: an expression over ``variables``, or an int."""

    kind: str  # "expr" | "int" | "choice"
    required: bool = True
    variables: tuple[str, ...] = ("r",)
    choices: tuple[str, ...] = ()
    minimum: int = 0
    maximum: int = 2**63 - 1
    result: tuple[str, ...] = ()
    """For expressions: the result types accepted at submission (empty: any)."""
    batch: tuple[str, ...] = ()
    """For expressions: the batch forms to compile (:data:`~operators.graph.cel.BATCH_SHAPES`)."""


@dataclass(frozen=True, slots=True)
class OpKind:
    """An operator offered in graphs: its ports and parameters."""

    name: str
    inputs: int | None
    """Number of inputs; ``None`` means one or more (as many as edges connect)."""
    outputs: int | str
    """Number of outputs, or the name of the int parameter that gives it."""
    params: dict[str, Param] = field(default_factory=dict)
    spans_times: bool = False
    """Whether a record at one time can make output at another (``delay``): a dataflow with
    such an operator keeps its inputs' whole logs, since an output time may need input from
    any earlier time to be computed again."""
    builder: Callable[[list[Stream], dict[str, Any]], list[Stream]] | None = None
    """For operators registered by the deployer: builds it from its input streams and
    parameters (expressions already compiled to functions)."""


_ON_ERROR = Param("choice", required=False, choices=("drop", "fail"))

CATALOGUE: dict[str, OpKind] = {
    kind.name: kind
    for kind in [
        OpKind("input", 0, 1),
        OpKind("output", 1, 0),
        OpKind("map", 1, 1, {"expr": Param("expr", batch=("map",)), "on_error": _ON_ERROR}),
        OpKind("flat_map", 1, 1, {"expr": Param("expr", batch=("map",)), "on_error": _ON_ERROR}),
        OpKind(
            "filter",
            1,
            1,
            {
                "expr": Param("expr", result=("bool", "dyn"), batch=("filter",)),
                "on_error": _ON_ERROR,
            },
        ),
        OpKind("exchange", 1, 1, {"key": Param("expr", batch=("pairs",)), "on_error": _ON_ERROR}),
        OpKind("key_by", 1, 1, {"key": Param("expr", batch=("pairs",)), "on_error": _ON_ERROR}),
        OpKind("concat", None, 1),
        OpKind(
            "partition",
            1,
            "parts",
            {
                "parts": Param("int", minimum=1, maximum=1024),
                "expr": Param("expr", result=("int", "dyn")),
                "on_error": _ON_ERROR,
            },
        ),
        OpKind(
            "branch", 1, 2, {"expr": Param("expr", result=("bool", "dyn")), "on_error": _ON_ERROR}
        ),
        OpKind("count", 1, 1),
        OpKind("count_by", 1, 1, {"key": Param("expr", batch=("key",)), "on_error": _ON_ERROR}),
        OpKind(
            "accumulate",
            1,
            1,
            {
                "init": Param("expr", variables=()),
                "fold": Param("expr", variables=("acc", "r")),
                "on_error": _ON_ERROR,
            },
        ),
        OpKind(
            "aggregate",
            1,
            1,
            {
                "key": Param("expr", batch=("pairs",)),
                "init": Param("expr", variables=()),
                "fold": Param("expr", variables=("acc", "r")),
                "emit": Param("expr", required=False, variables=("key", "acc")),
                "on_error": _ON_ERROR,
            },
        ),
        OpKind(
            "join",
            2,
            1,
            {
                "key_left": Param("expr", batch=("pairs",)),
                "key_right": Param("expr", batch=("pairs",)),
                "on_error": _ON_ERROR,
            },
        ),
        OpKind(
            "delay",
            1,
            1,
            {"expr": Param("expr", variables=("r", "t")), "on_error": _ON_ERROR},
            spans_times=True,
        ),
        OpKind(
            "feedback", 1, 1, {"summary": Param("int", required=False, minimum=1, maximum=2**32)}
        ),
        OpKind("inspect", 1, 1),
    ]
}
"""Every operator a graph may use, by name."""


# --------------------------------------------------------------------------- errors at run time


class RecordErrors:
    """Counts of records dropped because an expression failed, per node, with the last error."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.last: dict[str, str] = {}

    def record(self, node: str, error: Exception) -> None:
        """Count one failed record at ``node``."""
        self.counts[node] = self.counts.get(node, 0) + 1
        self.last[node] = str(error)


def _guarded(
    node: str, fn: Callable[..., Any], policy: str, errors: RecordErrors
) -> Callable[..., Any]:
    """``fn`` with the node's error policy: re-raise (``fail``) or mark the record dropped."""
    if policy == "fail":

        def failing(*args: Any) -> Any:
            try:
                return fn(*args)
            except EvaluationError as error:
                raise EvaluationError(f"node {node!r}: {error}") from None

        return failing

    def dropping(*args: Any) -> Any:
        try:
            return fn(*args)
        except EvaluationError as error:
            errors.record(node, error)
            return _DROPPED

    return dropping


class _Dropped:
    """Marks a record whose expression failed; filtered out before anything is sent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dropped>"


_DROPPED: Any = _Dropped()


# --------------------------------------------------------------------------- the context


class GraphContext(Protocol):
    """What a plan needs from whoever runs it: its inputs and outputs."""

    def input(self, name: str, scope: Any) -> Stream:
        """The stream of records entering at input node ``name``."""
        ...

    def output(self, name: str, stream: Stream) -> None:
        """Take the records leaving at output node ``name``."""
        ...


@dataclass(slots=True)
class BuiltGraph:
    """What one worker built: where each node's operator lives (for frontiers and counts)."""

    streams: dict[str, list[Stream]]
    """Each node's output streams (their ``source`` locates the node's operator)."""
    scopes: dict[str | None, Any]
    """Each scope by name (``None`` is the root)."""


# --------------------------------------------------------------------------- the plan


@dataclass(slots=True)
class Plan:
    """A checked, compiled graph, ready to be built on every worker."""

    spec: GraphSpec
    order: list[str]
    """Nodes in build order (every node after the sources of its inputs, feedback first)."""
    inputs_of: dict[str, list[tuple[str, int]]]
    """Per node, per input port, the ``(node, output port)`` feeding it."""
    outputs_of: dict[str, int]
    expressions: dict[str, dict[str, Expression]]
    errors: RecordErrors = field(default_factory=RecordErrors)

    def describe(self) -> dict[str, Any]:
        """The compiled plan as JSON (for ``dry_run``): order, ports and generated code."""
        return {
            "time": self.spec.time.describe(),
            "scopes": {
                name: {"kind": s.kind, "parent": s.parent} for name, s in self.spec.scopes.items()
            },
            "inputs": self.spec.inputs(),
            "outputs": self.spec.outputs(),
            "order": self.order,
            "nodes": {
                name: {
                    "op": self.spec.nodes[name].op,
                    "scope": self.spec.nodes[name].scope,
                    "inputs": [f"{n}:{p}" for n, p in self.inputs_of[name]],
                    "outputs": self.outputs_of[name],
                    "expressions": {
                        param: {"source": e.source, "python": e.python, "type": e.result_type}
                        for param, e in self.expressions.get(name, {}).items()
                    },
                }
                for name in self.order
            },
        }

    def spans_times(self) -> bool:
        """Whether an operator of the graph makes output at other times than its input's."""
        return any(CATALOGUE[node.op].spans_times for node in self.spec.nodes.values())

    def minimum(self) -> Hashable:
        """The least time of the graph's root time domain."""
        return self.spec.time.domain().minimum

    def build(self, root: Any, context: GraphContext) -> BuiltGraph:
        """Build the dataflow in ``root`` (a worker's scope): call inside ``worker.dataflow``."""
        spec = self.spec
        scopes: dict[str | None, Any] = {None: root}

        def scope_of(name: str | None) -> Any:
            if name not in scopes:
                info = spec.scopes[name]  # type: ignore[index]
                parent = scope_of(info.parent)
                scopes[name] = (
                    parent.iterative(name) if info.kind == "iterative" else (parent.region(name))
                )
            return scopes[name]

        for name in spec.scopes:
            scope_of(name)
        streams: dict[str, list[Stream]] = {}
        loops: dict[str, Any] = {}
        for name in self.order:
            node = spec.nodes[name]
            scope = scope_of(node.scope)
            if node.op == "feedback":
                summary = int(node.params.get("summary", 1))
                handle, stream = scope.feedback(_loop_summary(scope, summary))
                loops[name] = handle
                streams[name] = [stream]
                continue
            inputs = [
                _move(streams[src][port], scope_of(node.scope), scopes, spec)
                for src, port in self.inputs_of[name]
            ]
            streams[name] = self._build_node(node, scope, inputs, context)
        for name, handle in loops.items():
            (src, port) = self.inputs_of[name][0]
            handle.connect(
                _move(streams[src][port], scope_of(spec.nodes[name].scope), scopes, spec)
            )
        return BuiltGraph(streams, scopes)

    def _build_node(
        self, node: NodeSpec, scope: Any, inputs: list[Stream], context: GraphContext
    ) -> list[Stream]:
        op = node.op
        name = node.name
        exprs = self.expressions.get(name, {})
        policy = str(node.params.get("on_error", "drop"))

        def fn(param: str) -> Callable[..., Any]:
            return _guarded(name, exprs[param].fn, policy, self.errors)

        kind = CATALOGUE[op]
        if kind.builder is not None:
            params: dict[str, Any] = dict(node.params)
            for key in exprs:
                params[key] = fn(key)
            return kind.builder(inputs, params)
        if op == "input":
            return [context.input(name, scope)]
        if op == "output":
            context.output(name, inputs[0])
            return []
        if op == "inspect":
            return [inputs[0].inspect_batch(lambda _t, _r: None)]
        if op == "concat":
            return [inputs[0].concat(*inputs[1:])] if len(inputs) > 1 else [inputs[0]]
        if op == "map":
            return [inputs[0].map_batches(self._batched(name, exprs["expr"], "map", policy))]
        if op == "flat_map":
            values = self._batched(name, exprs["expr"], "map", policy)
            errors = self.errors
            return [inputs[0].map_batches(lambda rs: _flatten(values(rs), name, policy, errors))]
        if op == "filter":
            return [inputs[0].map_batches(self._batched(name, exprs["expr"], "filter", policy))]
        if op in ("exchange", "key_by"):
            keyed = inputs[0].map_batches(self._batched(name, exprs["key"], "pairs", policy))
            return [keyed.exchange(_first).map_batches(_seconds)]
        if op == "partition":
            parts = int(node.params["parts"])
            raw = exprs["expr"].fn
            keyed = self._keyed(inputs[0], name, raw, lambda v: _part(v, parts), policy)
            return keyed.partition(parts, lambda pair: (pair[0], pair[1]))
        if op == "branch":
            raw = exprs["expr"].fn
            keyed = self._keyed(inputs[0], name, raw, lambda v: _as_bool(v, "branch"), policy)
            false, true = keyed.branch(lambda pair: pair[0])
            return [false.map(_second), true.map(_second)]
        if op == "count":
            # Count on each worker, then add the per-worker counts up on one: only the
            # counts cross workers, not the records.
            return [inputs[0].count().exchange(_zero).accumulate(int, _add_all)]
        if op == "count_by":
            keys = inputs[0].map_batches(self._batched(name, exprs["key"], "key", policy))
            return [keys.count_by().map_batches(_key_counts)]
        if op == "accumulate":
            init = _guarded(name, exprs["init"].fn, "fail", self.errors)
            fold = fn("fold")
            return [
                inputs[0]
                .exchange(lambda _r: 0)
                .accumulate(init, lambda acc, records: _fold_all(fold, acc, records))
            ]
        if op == "aggregate":
            fold = fn("fold")
            init = _guarded(name, exprs["init"].fn, "fail", self.errors)
            emit = (
                fn("emit") if "emit" in exprs else (lambda k, a: {"key": _json_key(k), "value": a})
            )
            keyed = inputs[0].map_batches(self._batched(name, exprs["key"], "pairs", policy))
            return [
                keyed.aggregate(
                    _first,
                    lambda acc, pair: _keep_acc(acc, fold(acc, pair[1])),
                    lambda k, acc: emit(_json_key(k), acc),
                    init,
                ).filter(_kept)
            ]
        if op == "join":
            left = inputs[0].map_batches(self._batched(name, exprs["key_left"], "pairs", policy))
            right = inputs[1].map_batches(self._batched(name, exprs["key_right"], "pairs", policy))
            joined = left.join(right, _first, _first)
            return [joined.map(lambda lr: {"left": lr[0][1], "right": lr[1][1]})]
        if op == "delay":
            raw = exprs["expr"].fn
            f = _guarded(name, lambda r, t: _later(raw(r, t), t), policy, self.errors)
            return [inputs[0].delay(lambda r, t: None if (u := f(r, t)) is _DROPPED else u)]
        raise AssertionError(f"unhandled operator {op!r}")  # the catalogue and this agree

    def _batched(
        self, node: str, expression: Expression, shape: str, policy: str
    ) -> Callable[[list[Any]], list[Any]]:
        """The expression's batch form ``shape``, with the node's error policy.

        The batch form evaluates the whole batch in one comprehension. If it fails on a
        record, the batch is evaluated again record by record (expressions have no side
        effects), which drops and counts exactly the records that fail, or fails the dataflow
        with the node's name, as :func:`_guarded` does.
        """
        fast = expression.batch[shape]
        one = _guarded(node, _single(expression.fn, shape), policy, self.errors)

        def batch(records: list[Any]) -> list[Any]:
            try:
                return fast(records)
            except EvaluationError:
                return [v for v in map(one, records) if v is not _DROPPED]

        return batch

    def _keyed(
        self,
        stream: Stream,
        name: str,
        raw: Callable[[Any], Any],
        check: Callable[[Any], Any],
        policy: str,
    ) -> Stream:
        """``(check(raw(r)), r)`` pairs; records whose expression fails are dropped."""
        guarded = _guarded(name, lambda r: (check(raw(r)), r), policy, self.errors)
        return stream.map(guarded).filter(_kept)


def _single(fn: Callable[[Any], Any], shape: str) -> Callable[[Any], Any]:
    """What the batch form ``shape`` gives for one record (``_DROPPED`` for none)."""
    if shape == "map":
        return fn
    if shape == "filter":
        return lambda r: r if _as_bool(fn(r), "filter") else _DROPPED
    if shape == "key":
        return lambda r: hashable(fn(r))
    return lambda r: (hashable(fn(r)), r)


def _flatten(values: list[Any], node: str, policy: str, errors: RecordErrors) -> list[Any]:
    """flat_map's records: the lists in ``values`` concatenated; other values fail."""
    if all(type(v) is list for v in values):
        return list(chain.from_iterable(values))
    out: list[Any] = []
    for value in values:
        try:
            out.extend(_as_list(value))
        except EvaluationError as error:
            if policy == "fail":
                raise EvaluationError(f"node {node!r}: {error}") from None
            errors.record(node, error)
    return out


def _zero(_record: Any) -> int:
    return 0


def _add_all(total: int, counts: list[int]) -> int:
    return total + sum(counts)


def _seconds(pairs: list[tuple[Any, Any]]) -> list[Any]:
    return [pair[1] for pair in pairs]


_first = itemgetter(0)
_second = itemgetter(1)


def _kept(value: Any) -> bool:
    return value is not _DROPPED


def _as_bool(value: Any, op: str) -> bool:
    if type(value) is not bool:
        raise EvaluationError(f"{op} needs a bool, not {type(value).__name__}")
    return value


def _json_key(key: Any) -> Any:
    return [_json_key(k) for k in key] if isinstance(key, tuple) else key


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise EvaluationError(f"flat_map needs a list, not {type(value).__name__}")
    return value


def _part(value: Any, parts: int) -> int:
    if type(value) is not int or not 0 <= value < parts:
        raise EvaluationError(f"partition expression gave {value!r}, not an int in [0, {parts})")
    return value


def _key_counts(pairs: list[tuple[Any, int]]) -> list[dict[str, Any]]:
    """count_by's records: ``{"key", "count"}``, with keys back in their JSON form.

    There is no call for a key that is not a tuple, i.e. for nearly every one.
    """
    return [{"key": _json_key(k) if type(k) is tuple else k, "count": n} for k, n in pairs]


def _fold_all(fold: Callable[[Any, Any], Any], acc: Any, records: list[Any]) -> Any:
    for record in records:
        result = fold(acc, record)
        if result is not _DROPPED:
            acc = result
    return acc


def _keep_acc(old: Any, new: Any) -> Any:
    return old if new is _DROPPED else new


def _later(value: Any, time: Hashable) -> Hashable:
    """A delay expression's result as a time no earlier than ``time``, or an error."""
    try:
        later = decode_time(value) if isinstance(value, list) else value
        check_time(later)
    except (TypeError, ValueError, EventFormatError):
        raise EvaluationError(f"delay needs a time, not {value!r}") from None
    if not less_equal(time, later):
        raise EvaluationError(f"cannot delay a record at {time!r} to the earlier {later!r}")
    return later


def _loop_summary(scope: Any, summary: int) -> Hashable:
    """A loop's summary in an iterative scope: ``summary`` on the innermost coordinate."""
    outer = scope.identity.outer if isinstance(scope.identity, Product) else 0
    return Product(outer, summary)


def _ancestors(name: str | None, spec: GraphSpec) -> list[str | None]:
    chain: list[str | None] = [name]
    while name is not None:
        name = spec.scopes[name].parent
        chain.append(name)
    return chain


def _move(stream: Stream, target: Any, scopes: dict[str | None, Any], spec: GraphSpec) -> Stream:
    """Carry ``stream`` into the scope ``target`` (leaving and entering scopes as needed)."""
    by_builder = {id(s.builder): n for n, s in scopes.items()}
    here = by_builder[id(stream.scope.builder)]
    there = by_builder[id(target.builder)]
    if here == there:
        return stream
    up = _ancestors(here, spec)
    down = _ancestors(there, spec)
    common = next(s for s in up if s in down)
    for _ in range(up.index(common)):
        stream = stream.leave()
    for name in reversed(down[: down.index(common)]):
        stream = stream.enter(scopes[name])
    return stream


# --------------------------------------------------------------------------- checking


def compile_graph(spec: GraphSpec) -> Plan:
    """Check everything about ``spec`` and compile its expressions.

    Raises:
        GraphError: listing every problem found, each with a JSON pointer.
    """
    problems: list[Problem] = []
    expressions: dict[str, dict[str, Expression]] = {}
    outputs_of: dict[str, int] = {}
    kinds: dict[str, OpKind] = {}

    for node in spec.nodes.values():
        kind = CATALOGUE.get(node.op)
        if kind is None:
            known = ", ".join(sorted(CATALOGUE))
            problems.append(
                Problem(f"{node.pointer}/op", f"unknown operator {node.op!r} ({known})")
            )
            continue
        kinds[node.name] = kind
        compiled: dict[str, Expression] = {}
        problems.extend(
            Problem(f"{node.pointer}/{escape(key)}", f"{node.op} has no parameter {key!r}")
            for key in node.params
            if key not in kind.params
        )
        for key, param in kind.params.items():
            pointer = f"{node.pointer}/{escape(key)}"
            if key not in node.params:
                if param.required:
                    problems.append(Problem(pointer, f"{node.op} needs the parameter {key!r}"))
                continue
            value = node.params[key]
            if param.kind == "expr":
                if not isinstance(value, str):
                    problems.append(Problem(pointer, "an expression must be a string"))
                    continue
                try:
                    compiled[key] = compile_expression(value, param.variables, batch=param.batch)
                except ExpressionError as error:
                    problems.append(Problem(pointer, f"expression does not compile: {error}"))
                    continue
                found = compiled[key].result_type
                if param.result and found not in param.result:
                    wanted = " or ".join(t for t in param.result if t != "dyn")
                    problems.append(Problem(pointer, f"the expression gives {found}, not {wanted}"))
            elif param.kind == "int":
                if type(value) is not int or not param.minimum <= value <= param.maximum:
                    problems.append(
                        Problem(
                            pointer,
                            f"must be an integer from {param.minimum} to {param.maximum}",
                        )
                    )
            elif param.kind == "json":
                pass  # any JSON value: the operator's builder checks it
            elif param.kind == "choice" and value not in param.choices:
                problems.append(Problem(pointer, f"must be one of {', '.join(param.choices)}"))
        expressions[node.name] = compiled
        outputs = kind.outputs
        count = outputs if isinstance(outputs, int) else node.params.get(outputs, 1)
        outputs_of[node.name] = count if type(count) is int and count >= 0 else 1
        if node.op in ("input", "output") and node.scope is not None:
            problems.append(Problem(f"{node.pointer}/scope", f"an {node.op} must be in the root"))
        if node.op == "feedback" and (
            node.scope is None or spec.scopes[node.scope].kind != "iterative"
        ):
            problems.append(Problem(node.pointer, "a feedback must be inside an iterative scope"))

    inputs_of: dict[str, dict[int, tuple[str, int, str]]] = {n: {} for n in spec.nodes}
    for edge in spec.edges:
        source, target = edge.source, edge.target
        ok = True
        if source.node not in spec.nodes:
            problems.append(Problem(edge.source_pointer, f"no node {source.node!r}"))
            ok = False
        elif source.node in outputs_of and source.port >= outputs_of[source.node]:
            problems.append(
                Problem(
                    edge.source_pointer,
                    f"{source.node} ({spec.nodes[source.node].op}) has no output {source.port}",
                )
            )
            ok = False
        if target.node not in spec.nodes:
            problems.append(Problem(edge.target_pointer, f"no node {target.node!r}"))
            ok = False
        elif target.node in kinds:
            arity = kinds[target.node].inputs
            if arity is not None and target.port >= arity:
                problems.append(
                    Problem(
                        edge.target_pointer,
                        f"{target.node} ({spec.nodes[target.node].op}) has no input {target.port}",
                    )
                )
                ok = False
        if not ok:
            continue
        taken = inputs_of[target.node].get(target.port)
        if taken is not None:
            problems.append(
                Problem(
                    edge.target_pointer,
                    f"input {target} is already connected by {taken[2]}; use a concat to merge",
                )
            )
            continue
        inputs_of[target.node][target.port] = (source.node, source.port, edge.pointer)

    ordered_inputs: dict[str, list[tuple[str, int]]] = {}
    for name, kind in kinds.items():
        ports = inputs_of[name]
        arity = kind.inputs if kind.inputs is not None else max(len(ports), 1)
        problems.extend(
            Problem(spec.nodes[name].pointer, f"input {name}:{port} is not connected")
            for port in range(arity)
            if port not in ports
        )
        ordered_inputs[name] = [ports[p][:2] for p in sorted(ports)]

    if not problems:
        problems.extend(_check_cycles(spec, ordered_inputs))
    if problems:
        raise GraphError(problems)
    order = _build_order(spec, ordered_inputs)
    return Plan(spec, order, ordered_inputs, outputs_of, expressions)


def _check_cycles(spec: GraphSpec, inputs_of: dict[str, list[tuple[str, int]]]) -> list[Problem]:
    """Refuse cycles along which time does not advance.

    Only a feedback advances time, and only within its own iterative scope: leaving the
    scope drops the coordinate it advanced. So every cycle must pass a feedback that lives in
    the innermost scope holding the whole cycle. Checked by strongly connected components:
    each component needs such a feedback; cutting through those feedbacks, whatever cycles
    remain (deeper in nested scopes) are checked the same way.
    """
    successors: dict[str, set[str]] = {name: set() for name in spec.nodes}
    for name, sources in inputs_of.items():
        for src, _port in sources:
            successors[src].add(name)
    problems: list[Problem] = []
    _check_component(spec, set(spec.nodes), successors, problems)
    return problems


def _scope_chain(spec: GraphSpec, scope: str | None) -> list[str | None]:
    chain: list[str | None] = []
    while scope is not None:
        chain.append(scope)
        scope = spec.scopes[scope].parent
    chain.append(None)
    return chain[::-1]  # root first


def _innermost_common(spec: GraphSpec, nodes: set[str]) -> str | None:
    chains = [_scope_chain(spec, spec.nodes[n].scope) for n in nodes]
    common: str | None = None
    for level in zip(*chains, strict=False):
        if len(set(level)) != 1:
            break
        common = level[0]
    return common


def _check_component(
    spec: GraphSpec, nodes: set[str], successors: dict[str, set[str]], problems: list[Problem]
) -> None:
    for component in _components(nodes, successors):
        scope = _innermost_common(spec, component)
        feedbacks = {
            n for n in component if spec.nodes[n].op == "feedback" and spec.nodes[n].scope == scope
        }
        if not feedbacks:
            members = ", ".join(sorted(component))
            where = "the root scope" if scope is None else f"scope {scope!r}"
            problems.append(
                Problem(
                    "/edges",
                    f"the cycle through {members} does not pass a feedback of {where}, so "
                    "records could return at the same time",
                )
            )
            continue
        cut = {n: (set() if n in feedbacks else successors[n] & component) for n in component}
        _check_component(spec, component, cut, problems)


def _components(nodes: set[str], successors: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``nodes`` that contain a cycle."""
    from service.progress import Source, Target

    ordered = sorted(nodes)
    index = {name: i + 1 for i, name in enumerate(ordered)}
    reach = Builder()
    for name in ordered:
        reach.add_node(index[name], 1, 1, [{0: _chain(0)}])
    for name in ordered:
        for follower in sorted(successors.get(name, set()) & nodes):
            reach.add_edge(Source(index[name], 0), Target(index[follower], 0))
    transitions = reach.find_cycles()
    # Group the cyclic nodes by component: nodes joined by a cyclic transition.
    groups: dict[str, set[str]] = {}
    for start, end in transitions:
        a, b = ordered[start.node - 1], ordered[end.node - 1]
        group = groups.get(a, {a}) | groups.get(b, {b})
        for member in group:
            groups[member] = group
    unique: list[set[str]] = []
    for group in groups.values():
        if group not in unique:
            unique.append(group)
    return unique


def _chain(summary: int) -> Antichain[Hashable]:
    return Antichain([summary])


def _build_order(spec: GraphSpec, inputs_of: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Every node after the nodes feeding it; feedbacks count as ready from the start."""
    order: list[str] = []
    done: set[str] = set()
    pending = list(spec.nodes)
    while pending:
        progressed = False
        for name in list(pending):
            node = spec.nodes[name]
            ready = node.op == "feedback" or all(src in done for src, _ in inputs_of[name])
            if ready:
                order.append(name)
                done.add(name)
                pending.remove(name)
                progressed = True
        if not progressed:  # only possible through a cycle, which was refused already
            raise AssertionError(f"no build order for {pending}")
    return order


_BUILT_IN = frozenset(CATALOGUE)


def register_operator(kind: OpKind) -> None:
    """Offer an operator written in Python to graphs (for whoever deploys the server).

    ``kind.builder`` gets the node's input streams and its parameters (expressions compiled
    to functions that follow the node's ``on_error`` policy) and returns its output streams.
    API clients cannot register operators: only code the server loads (``operator_modules``
    in the settings, or the ``frontier.operators`` entry points) calls this.

    Raises:
        ValueError: the name is a built-in operator or the kind has no builder.
    """
    if kind.name in _BUILT_IN:
        raise ValueError(f"{kind.name!r} is a built-in operator and cannot be replaced")
    if kind.builder is None:
        raise ValueError(f"operator {kind.name!r} needs a builder")
    CATALOGUE[kind.name] = kind


def _describe_param(param: Param) -> dict[str, Any]:
    described: dict[str, Any] = {"kind": param.kind, "required": param.required}
    if param.kind == "expr":
        described["variables"] = list(param.variables)
        if param.result:
            described["result"] = [t for t in param.result if t != "dyn"]
    elif param.kind == "int":
        described["minimum"] = param.minimum
        described["maximum"] = param.maximum
    elif param.kind == "choice":
        described["choices"] = list(param.choices)
    return described


def describe_catalogue() -> list[dict[str, Any]]:
    """The operators graphs may use, as JSON (for documentation and the API)."""
    return [
        {
            "op": kind.name,
            "inputs": kind.inputs if kind.inputs is not None else "1 or more",
            "outputs": kind.outputs,
            "params": {name: _describe_param(p) for name, p in kind.params.items()},
        }
        for kind in CATALOGUE.values()
    ]


__all__: Sequence[str] = [
    "CATALOGUE",
    "BuiltGraph",
    "GraphContext",
    "OpKind",
    "Param",
    "Plan",
    "RecordErrors",
    "compile_graph",
    "describe_catalogue",
    "register_operator",
]
