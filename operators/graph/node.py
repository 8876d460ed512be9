"""What an operator's builder receives: the node being built, with its error policy.

A :class:`NodeBuilder` carries everything the plan knows about one node on one worker: its
name, parameters, input streams and scope, the :class:`GraphContext` (where inputs and
outputs attach), and its compiled expressions. Its helpers wrap those expressions in the
node's ``on_error`` policy: a record whose expression fails is dropped and counted in
:class:`RecordErrors` (``"drop"``, the default) or fails the dataflow naming the node
(``"fail"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from operators.graph.cel import EvaluationError, Expression, hashable
from operators.graph.columnar import OnColumns
from operators.stream import Stream


class RecordErrors:
    """Counts of records dropped because an expression failed, per node, with the last error.

    >>> errors = RecordErrors()
    >>> errors.record("n", EvaluationError("division by zero"))
    >>> errors.counts, errors.last
    ({'n': 1}, {'n': 'division by zero'})
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.last: dict[str, str] = {}

    def record(self, node: str, error: Exception) -> None:
        """Count one failed record at ``node``."""
        self.counts[node] = self.counts.get(node, 0) + 1
        self.last[node] = str(error)

    def record_many(self, node: str, count: int, last: str) -> None:
        """Count ``count`` failed records at ``node`` (a batch's), ``last`` the last's message.

        >>> errors = RecordErrors()
        >>> errors.record_many("n", 3, "division by zero")
        >>> errors.counts, errors.last
        ({'n': 3}, {'n': 'division by zero'})
        """
        self.counts[node] = self.counts.get(node, 0) + count
        self.last[node] = last


class GraphContext(Protocol):
    """What a plan needs from whoever runs it: its inputs and outputs."""

    def input(self, name: str, scope: Any) -> Stream:
        """The stream of records entering at input node ``name``."""
        ...

    def output(self, name: str, stream: Stream) -> None:
        """Take the records leaving at output node ``name``."""
        ...


class _Dropped:
    """Marks a record whose expression failed; filtered out before anything is sent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dropped>"


DROPPED: Final[Any] = _Dropped()
"""What a guarded function returns for a record it dropped (see :func:`guarded`)."""


def kept(value: Any) -> bool:
    """Whether ``value`` is a result, not :data:`DROPPED` (a ``filter`` predicate)."""
    return value is not DROPPED


def guarded(
    node: str, fn: Callable[..., Any], policy: str, errors: RecordErrors
) -> Callable[..., Any]:
    """``fn`` with the node's error policy: re-raise (``fail``) or mark the record dropped.

    >>> def inverse(x):
    ...     if x == 0:
    ...         raise EvaluationError("division by zero")
    ...     return 1 / x
    >>> errors = RecordErrors()
    >>> [guarded("n", inverse, "drop", errors)(x) for x in (2, 0)], errors.counts
    ([0.5, <dropped>], {'n': 1})
    """
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
            return DROPPED

    return dropping


def as_bool(value: Any, op: str) -> bool:
    """``value`` if it is a bool; else an :class:`EvaluationError` naming the operator."""
    if type(value) is not bool:
        raise EvaluationError(f"{op} needs a bool, not {type(value).__name__}")
    return value


def _single(fn: Callable[[Any], Any], shape: str) -> Callable[[Any], Any]:
    """What the batch form ``shape`` gives for one record (``DROPPED`` for none)."""
    if shape == "map":
        return fn
    if shape == "filter":
        return lambda r: r if as_bool(fn(r), "filter") else DROPPED
    if shape == "key":
        return lambda r: hashable(fn(r))
    return lambda r: (hashable(fn(r)), r)


@dataclass(frozen=True, slots=True)
class NodeBuilder:
    """A node being built on one worker: what its operator's builder receives.

    ``inputs`` are the node's input streams, in port order, already carried into its scope
    (empty for a loop operator, whose inputs are connected after every node is built).
    """

    name: str
    op: str
    params: Mapping[str, Any]
    inputs: Sequence[Stream]
    scope: Any
    context: GraphContext
    expressions: Mapping[str, Expression]
    errors: RecordErrors
    columnar: OnColumns | None = None
    """The node's columnar form, if the plan runs it on columns (:mod:`..columnar`)."""
    types: Sequence[Any] = ()
    """Its inputs' Arrow types, in port order, where it runs on columns."""

    @property
    def policy(self) -> str:
        """The node's ``on_error`` policy: ``"drop"`` (the default) or ``"fail"``."""
        return str(self.params.get("on_error", "drop"))

    def fn(self, param: str, policy: str | None = None) -> Callable[..., Any]:
        """The expression ``param`` as a function, under the node's policy (or ``policy``)."""
        chosen = self.policy if policy is None else policy
        return guarded(self.name, self.expressions[param].fn, chosen, self.errors)

    def guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Any function raising :class:`EvaluationError`, under the node's policy."""
        return guarded(self.name, fn, self.policy, self.errors)

    def batched(self, param: str, shape: str) -> Callable[[list[Any]], list[Any]]:
        """The expression ``param``'s batch form ``shape``, under the node's policy.

        The batch form evaluates the whole batch in one comprehension. If it fails on a
        record, the batch is evaluated again record by record (expressions have no side
        effects), which drops and counts exactly the records that fail, or fails the dataflow
        with the node's name, as :func:`guarded` does.
        """
        expression = self.expressions[param]
        fast = expression.batch[shape]
        one = self.guard(_single(expression.fn, shape))

        def batch(records: list[Any]) -> list[Any]:
            try:
                return fast(records)
            except EvaluationError:
                return [v for v in map(one, records) if v is not DROPPED]

        return batch

    def keyed(self, param: str, check: Callable[[Any], Any]) -> Stream:
        """The first input's records ``r`` as pairs ``(check(param(r)), r)``.

        Records whose expression (or check) fails are dropped and counted, or fail the
        dataflow, by the node's policy.
        """
        raw = self.expressions[param].fn
        pairs = self.guard(lambda r: (check(raw(r)), r))
        return self.inputs[0].evaluate(lambda records: list(map(pairs, records))).filter(kept)

    def compiled_params(self) -> dict[str, Any]:
        """The parameters with every expression compiled to a function under the policy."""
        params = dict(self.params)
        for key in self.expressions:
            params[key] = self.fn(key)
        return params


__all__: Sequence[str] = [
    "DROPPED",
    "GraphContext",
    "NodeBuilder",
    "RecordErrors",
    "as_bool",
    "guarded",
    "kept",
]
