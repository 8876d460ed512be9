"""The graph at the API's edge: a request's graph checked into a ``GraphSpec``, or a 422.

A graph submitted to ``POST /v1/dataflows`` is checked in three steps, each reporting every
problem it finds (422, JSON pointers relative to the graph):

1. its request body, before it is parsed (:func:`check_graph_body`): at most
   :data:`MAX_GRAPH_BYTES` of JSON, nesting at most :data:`MAX_GRAPH_DEPTH` levels, so that
   what a client sends costs bounded work, and a graph nested thousands deep is a 422 naming
   the limit, not the JSON parser's recursion error (a 400 before);
2. its shape, by the graph model :data:`GRAPH`, which hands the service a checked
   :class:`~service.app.GraphSpec`: fields, names, the time domain, scopes, nodes, edges and
   ports, and the limits on nodes, edges, scopes and how deeply scopes and time domains nest;
   then each node's parameters, by the parameter model of its operator (:func:`node_params`:
   a pydantic model per operator of the registry, a union discriminated on ``op``);
3. its meaning, by the service's compiler: operators, ports, scopes, cycles, expressions.

The graph's structure is checked by the one structure checker,
:func:`~service.app.parse_graph` (``operators/graph/spec.py``), which library users and
recovery, handing the service a graph as JSON, go through too. Each problem it finds becomes
a pydantic error of type :data:`~api.models.GRAPH_PROBLEM` (a ``PydanticCustomError`` with the
checker's message) at the problem's pointer, so
:func:`~api.models.problem_from_validation_error` gives back exactly its pointers and messages.

Parameters' problems do not stop the graph at the edge: they are handed to the compiler on
each node (``NodeSpec.checked``), which lists them in node order with the operators',
expressions' and ports' problems, so a graph's problems stay one list, as ``docs/graphs.md``
shows. The messages are the compiler's own (``param_problems``, what a library user's graph
is checked with), pointer for pointer.

>>> GRAPH.validate_python({"nodes": {"in": {"op": "input"}}}).inputs()
['in']
>>> try:
...     GRAPH.validate_python({"nodes": {"1st": {"op": "input"}}, "edges": [["a:b", "c"]]})
... except ValidationError as error:
...     for problem in problem_from_validation_error(error):
...         print(problem["pointer"], "-", problem["detail"])
/nodes/1st - '1st' is not a valid name
/edges/0/0 - "a:b" is not a port ("node" or "node:port")
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from itertools import accumulate, repeat
from operator import sub
from typing import Annotated, Any, Final, Literal, Union

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    JsonValue,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    create_model,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from api.models import GRAPH_PROBLEM, problem_from_validation_error
from service.app import (
    GraphError,
    GraphSpec,
    Invalid,
    Problem,
    describe_catalogue,
    escape,
    parse_graph,
)

MAX_GRAPH_BYTES: Final = 1 << 20
"""The largest request body a graph may come in, in bytes (1 MiB: a thousand nodes of about
a kilobyte each). Everything checking a graph does is bounded by it, including how many
problems a graph can have and how long they are."""

MAX_GRAPH_DEPTH: Final = 64
"""How deeply arrays and objects may nest in a graph (``{}`` is one level, a node's
parameters are three deep). The JSON parser refuses about 200 levels; a graph this deep is
refused first, naming this limit."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # 1 more than the step: bytes are >= 0


def json_depth(text: bytes) -> int:
    r"""How deeply arrays and objects nest in the JSON ``text`` (a scalar is 0, ``[{}]`` is 2).

    Measured on the bytes, without parsing (so without recursion): strings are cut out and the
    brackets left are added up, in C loops (a few milliseconds for a MiB). Exact for JSON; for
    text that is not JSON the parser refuses it anyway, whatever this says.

    >>> json_depth(b'{"a": [1, {"b": "]]]}"}], "c": "\\"}'), json_depth(b"5"), json_depth(b"[[]]")
    (3, 0, 2)
    """
    brackets = _STRING.sub(b"", text).translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(map(sub, brackets, repeat(1))), default=0)


def _refuse(message: str) -> Invalid:
    return Invalid("the graph has 1 problem(s)", [{"pointer": "", "detail": message}])


def check_graph_body(body: bytes) -> None:
    """:class:`~service.app.Invalid` (422, naming the limit) for a graph's body over a limit.

    ``body`` is the request's body, ``{"graph": ..., "name": ...}``: its graph nests one level
    less than the body does.
    """
    if len(body) > MAX_GRAPH_BYTES:
        raise _refuse(
            f"at most {MAX_GRAPH_BYTES} bytes of JSON are allowed in a graph (this request's "
            f"body has {len(body)})"
        )
    if json_depth(body) - 1 > MAX_GRAPH_DEPTH:
        raise _refuse(f"at most {MAX_GRAPH_DEPTH} levels of nesting are allowed in a graph")


def _tokens(pointer: str) -> tuple[str, ...]:
    """The reference tokens of a JSON pointer (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``)."""
    if not pointer:
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


# --------------------------------------------------------------------------- parameters


def _param_field(param: dict[str, Any]) -> Any:
    """The type of a parameter, from its description in the registry (``GET /v1/operators``)."""
    kind = param["kind"]
    if kind == "expr":
        return StrictStr
    if kind == "int":
        return Annotated[StrictInt, Field(ge=param["minimum"], le=param["maximum"])]
    if kind == "choice":
        return Literal[tuple(param["choices"])]
    return JsonValue  # "json": any JSON value, which the operator's builder checks


def _op_model(operator: dict[str, Any]) -> type[BaseModel]:
    """One operator's node: its ``op``, its ``scope`` (checked as structure) and parameters.

    Parameters are fields under their own names as aliases (a name need not be a Python
    identifier, nor stay clear of pydantic's own attributes).
    """
    fields: dict[str, Any] = {
        "op": (Literal[operator["op"]], ...),
        "scope": (Any, None),
    }
    for index, (name, param) in enumerate(operator["params"].items()):
        default = ... if param["required"] else None
        fields[f"param_{index}"] = (_param_field(param), Field(default, alias=name))
    model: type[BaseModel] = create_model(
        f"Node_{operator['op']}", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


@lru_cache(maxsize=4)
def _params_adapter(catalogue: bytes) -> tuple[TypeAdapter[Any], dict[str, dict[str, Any]]]:
    """The union of every operator's node model, discriminated on ``op``.

    Cached by catalogue: a deployer's operators are registered when the server starts.
    """
    operators = orjson.loads(catalogue)
    models = tuple(_op_model(operator) for operator in operators)
    union: Any = Annotated[Union[models], Field(discriminator="op")]  # noqa: UP007 - a tuple
    return TypeAdapter(union), {operator["op"]: operator for operator in operators}


def node_params() -> TypeAdapter[Any]:
    """The parameter model of every operator in the registry: a union discriminated on ``op``.

    >>> node_params().validate_python({"op": "partition", "parts": 2, "expr": "r % 2"}).op
    'partition'
    """
    return _params_adapter(orjson.dumps(describe_catalogue()))[0]


def _param_message(error: Any, operator: dict[str, Any]) -> str:
    """A parameter model's error in the compiler's words (``param_problems``)."""
    op, key = operator["op"], error["loc"][-1]
    if error["type"] == "extra_forbidden":
        return f"{op} has no parameter {key!r}"
    if error["type"] == "missing":
        return f"{op} needs the parameter {key!r}"
    param = operator["params"][key]
    if param["kind"] == "expr":
        return "an expression must be a string"
    if param["kind"] == "int":
        return f"must be an integer from {param['minimum']} to {param['maximum']}"
    return f"must be one of {', '.join(param['choices'])}"


def _param_problems(
    node: Any, adapter: TypeAdapter[Any], operators: dict[str, dict[str, Any]]
) -> tuple[Problem, ...] | None:
    """The problems of a node's parameters, by its operator's model.

    ``None`` for an unknown operator: the compiler reports it, with the operators there are.
    """
    operator = operators.get(node.op)
    if operator is None:
        return None
    try:
        adapter.validate_python({**node.params, "op": node.op, "scope": node.scope})
    except ValidationError as error:
        errors = error.errors(include_url=False, include_input=False)
        # pydantic lists extra fields last; the compiler lists them first, as the node has them
        errors.sort(key=lambda e: e["type"] != "extra_forbidden")
        return tuple(
            Problem(f"{node.pointer}/{escape(str(e['loc'][-1]))}", _param_message(e, operator))
            for e in errors
        )
    return ()


def _with_params_checked(spec: GraphSpec) -> GraphSpec:
    """``spec`` with each node's parameters checked by its operator's model."""
    adapter, operators = _params_adapter(orjson.dumps(describe_catalogue()))
    nodes = {
        name: dataclasses.replace(node, checked=_param_problems(node, adapter, operators))
        for name, node in spec.nodes.items()
    }
    return dataclasses.replace(spec, nodes=nodes)


# --------------------------------------------------------------------------- the graph


def _checked(document: Any) -> GraphSpec:
    """The graph's structure checked by :func:`~service.app.parse_graph`, then its nodes'.

    The structure's problems are raised as errors; each node's parameters, checked by its
    operator's model, go to the compiler on the node (``NodeSpec.checked``).
    """
    try:
        return _with_params_checked(parse_graph(document))
    except GraphError as error:
        # The message goes in as context: a template would read the braces some messages have.
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(GRAPH_PROBLEM, "{message}", {"message": p.message}),
                loc=_tokens(p.pointer),
                input=document,
            )
            for p in error.problems
        ]
        raise ValidationError.from_exception_data("Graph", errors) from None


_GRAPH_JSON_SCHEMA: dict[str, Any] = {
    "title": "Graph",
    "description": "A dataflow graph: docs/graphs.md, and openapi.yaml's Graph schema.",
    "type": "object",
    "required": ["nodes"],
}

Graph = Annotated[
    GraphSpec,
    GetPydanticSchema(
        lambda _source, _handler: core_schema.no_info_plain_validator_function(_checked)
    ),
    WithJsonSchema(_GRAPH_JSON_SCHEMA),
]
"""A graph: validated from its JSON form (a ``dict``) into a :class:`~service.app.GraphSpec`."""

GRAPH: TypeAdapter[GraphSpec] = TypeAdapter(Graph)
"""The graph model: ``GRAPH.validate_python(document)`` is a checked ``GraphSpec``."""


def graph_spec(document: Any) -> GraphSpec:
    """A request's graph, shape checked; :class:`~service.app.Invalid` lists every problem.

    The problems' pointers are relative to the graph, as the compiler's are.
    """
    try:
        return GRAPH.validate_python(document)
    except ValidationError as error:
        problems = problem_from_validation_error(error)
        raise Invalid(f"the graph has {len(problems)} problem(s)", problems) from None


__all__ = [
    "GRAPH",
    "MAX_GRAPH_BYTES",
    "MAX_GRAPH_DEPTH",
    "Graph",
    "check_graph_body",
    "graph_spec",
    "json_depth",
    "node_params",
]
