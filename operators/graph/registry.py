"""The operator registry: every operator a graph may use, one entry each.

An entry is an :class:`OpKind`: the operator's ports, its typed parameters and its builder.
The built-in operators are entries in the family modules of :mod:`operators.graph.ops`
(registered with :func:`builtin` when that package is imported); whoever deploys the server
adds entries with :func:`register_operator`. The compiler checks nodes against the entries,
the plan builds nodes with them, and ``GET /v1/operators`` describes them
(:func:`describe_catalogue`); ``openapi.yaml`` and ``docs/graphs.md`` are checked against them
by the tests.

>>> from operators.graph import CATALOGUE
>>> CATALOGUE["map"].params["expr"].kind, CATALOGUE["concat"].inputs
('expr', None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from operators.graph.node import NodeBuilder
    from operators.stream import Stream

ParamKind = Literal["expr", "int", "choice", "json"]
"""What a parameter's value is: a CEL expression (a string), a bounded integer, one of a few
strings, or any JSON value (checked by the operator's builder)."""

PARAM_KINDS: Final[tuple[ParamKind, ...]] = ("expr", "int", "choice", "json")
"""Every :data:`ParamKind`, in the order the API documents them."""


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter of an operator kind: an expression over ``variables``, an int, a choice.

    >>> Param("int", minimum=1, maximum=8).required
    True
    """

    kind: ParamKind
    required: bool = True
    variables: tuple[str, ...] = ("r",)
    choices: tuple[str, ...] = ()
    minimum: int = 0
    maximum: int = 2**63 - 1
    result: tuple[str, ...] = ()
    """For expressions: the result types accepted at submission (empty: any)."""
    batch: tuple[str, ...] = ()
    """For expressions: the batch forms to compile (:data:`~operators.graph.cel.BATCH_SHAPES`)."""


Build = Callable[["NodeBuilder"], "list[Stream]"]
"""A builder: the node being built (inputs, parameters, compiled expressions) -> its outputs."""

Connect = Callable[["list[Stream]"], None]
"""Connects a loop operator's inputs, once every node of the graph is built."""

BuildLoop = Callable[["NodeBuilder"], "tuple[list[Stream], Connect]"]
"""A loop operator's builder: called before its inputs exist, it returns its output streams
and what connects its inputs at the end."""

Builder = Callable[["list[Stream]", dict[str, Any]], "list[Stream]"]
"""The deployer's builder: input streams and parameters (expressions compiled to functions
that follow the node's ``on_error`` policy) -> output streams."""


@dataclass(frozen=True, slots=True)
class OpKind:
    """An operator offered in graphs: its ports, its parameters and how it is built.

    Exactly one of ``build``, ``build_loop`` and ``builder`` is given. ``builder`` is the
    form offered to deployers (:func:`register_operator`): it sees only input streams and
    parameters, and is adapted onto ``build`` by :meth:`build_node`.

    >>> shout = OpKind("shout", 1, 1, builder=lambda inputs, params: inputs)
    >>> shout.is_loop, shout.spans_times
    (False, False)
    """

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
    builder: Builder | None = None
    """For operators registered by the deployer: builds it from its input streams and
    parameters (expressions already compiled to functions)."""
    build: Build | None = None
    """Builds the node from everything the plan knows about it (:class:`NodeBuilder`)."""
    build_loop: BuildLoop | None = None
    """For an operator a cycle may pass (``feedback``): it is built before its inputs exist,
    and connected once every node is. Such an operator must be in an iterative scope, is
    where a cycle advances time, and comes first in the build order."""
    in_root: bool = False
    """Whether the node must be in the root scope (inputs and outputs: producers and
    subscribers attach there)."""

    @property
    def is_loop(self) -> bool:
        """Whether a cycle may pass this operator (it has a ``build_loop``)."""
        return self.build_loop is not None

    def build_node(self, node: NodeBuilder) -> list[Stream]:
        """Build ``node`` (not a loop operator) and return its output streams."""
        if self.build is not None:
            return self.build(node)
        if self.builder is None:
            raise TypeError(f"operator {self.name!r} is built with build_loop")
        return self.builder(list(node.inputs), node.compiled_params())


CATALOGUE: dict[str, OpKind] = {}
"""Every operator a graph may use, by name, in the order registered (the registry)."""

_BUILT_IN: set[str] = set()

ON_ERROR: Final = Param("choice", required=False, choices=("drop", "fail"))
"""The ``on_error`` parameter every built-in operator with expressions takes."""


def builtin(kind: OpKind) -> OpKind:
    """Register a built-in operator (for the modules of :mod:`operators.graph.ops`).

    Raises:
        ValueError: an operator of that name exists, or the kind has no builder.
    """
    if kind.name in CATALOGUE:
        raise ValueError(f"operator {kind.name!r} is registered twice")
    _check_builder(kind)
    CATALOGUE[kind.name] = kind
    _BUILT_IN.add(kind.name)
    return kind


def register_operator(kind: OpKind) -> None:
    """Offer an operator written in Python to graphs (for whoever deploys the server).

    ``kind.builder`` gets the node's input streams and its parameters (expressions compiled
    to functions that follow the node's ``on_error`` policy) and returns its output streams;
    a kind may instead give ``build`` (or ``build_loop``), the form the built-in operators
    use. API clients cannot register operators: only code the server loads
    (``operator_modules`` in the settings, or the ``frontier.operators`` entry points) calls
    this.

    Raises:
        ValueError: the name is a built-in operator or the kind has no builder.
    """
    if kind.name in _BUILT_IN:
        raise ValueError(f"{kind.name!r} is a built-in operator and cannot be replaced")
    _check_builder(kind)
    CATALOGUE[kind.name] = kind


def _check_builder(kind: OpKind) -> None:
    given = [b for b in (kind.build, kind.build_loop, kind.builder) if b is not None]
    if not given:
        raise ValueError(f"operator {kind.name!r} needs a builder")
    if len(given) > 1:
        raise ValueError(f"operator {kind.name!r} has more than one builder")


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


def describe_kind(kind: OpKind) -> dict[str, Any]:
    """One operator as JSON: its ports and parameters (an item of ``GET /v1/operators``).

    >>> describe_kind(OpKind("pass", 1, 1, builder=lambda inputs, params: inputs))
    {'op': 'pass', 'inputs': 1, 'outputs': 1, 'params': {}}
    """
    return {
        "op": kind.name,
        "inputs": kind.inputs if kind.inputs is not None else "1 or more",
        "outputs": kind.outputs,
        "params": {name: _describe_param(p) for name, p in kind.params.items()},
    }


def describe_catalogue() -> list[dict[str, Any]]:
    """The operators graphs may use, as JSON (for documentation and the API)."""
    return [describe_kind(kind) for kind in CATALOGUE.values()]


__all__: Sequence[str] = [
    "CATALOGUE",
    "ON_ERROR",
    "PARAM_KINDS",
    "Build",
    "BuildLoop",
    "Builder",
    "Connect",
    "OpKind",
    "Param",
    "ParamKind",
    "builtin",
    "describe_catalogue",
    "describe_kind",
    "register_operator",
]
