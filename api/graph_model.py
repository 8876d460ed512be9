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
3. its meaning, by the service's compiler: operators and their parameters, ports, scopes,
   cycles, expressions.

The model is a thin typed wrapper: it delegates to the one shape checker,
:func:`~service.app.parse_graph` (``operators/graph/spec.py``), which library users and
recovery, handing the service a graph as JSON, go through too. Each problem the checker finds
becomes a pydantic error of type :data:`~api.models.GRAPH_PROBLEM` (a ``PydanticCustomError``
with the checker's message) at the problem's pointer, so
:func:`~api.models.problem_from_validation_error` gives back exactly its pointers and messages.
Operators' parameters are not in the model (no union on ``op`` here): the compiler checks them
against the operator registry (a deployer's operators included) in the same pass as the
operators and their expressions, so a graph's meaning problems stay one list in node order,
as ``docs/graphs.md`` shows.

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

import re
from itertools import accumulate, repeat
from operator import sub
from typing import Annotated, Any, Final

from pydantic import GetPydanticSchema, TypeAdapter, ValidationError, WithJsonSchema
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from api.models import GRAPH_PROBLEM, problem_from_validation_error
from service.app import GraphError, GraphSpec, Invalid, parse_graph

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


def _checked(document: Any) -> GraphSpec:
    """The graph's shape, checked by :func:`~service.app.parse_graph`; its problems as errors."""
    try:
        return parse_graph(document)
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
]
