"""The API contract files: openapi.yaml, asyncapi.yaml and the JSON Schemas they share.

* openapi.yaml is a valid OpenAPI 3.1 document and has exactly the routes of docs/api.md,
  each with the problem responses a client can cause;
* asyncapi.yaml has AsyncAPI 3.0's required structure, the channels of docs/api.md, and
  every message and operation points at something that exists;
* every ``$ref`` in the three kinds of file resolves, every schemas/*.json is a valid
  JSON Schema 2020-12 and is used, and every example embedded anywhere validates against
  the schema it illustrates;
* the pydantic request models (api/models.py) accept exactly what the schemas accept;
* the operator schemas (a graph's ``Node``, ``OperatorKind``) say what the operator registry
  says: its operators, their parameters and what each parameter takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import jsonschema
import pytest
import yaml
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from pydantic import BaseModel, TypeAdapter, ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from api import models
from api.codec import summary_json
from operators.graph import CATALOGUE, OpKind, Param, compile_graph, describe_catalogue, parse_graph
from operators.graph.registry import PARAM_KINDS, describe_kind
from service.app import errors
from service.app.dataflow import Identity, summary_of

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "openapi.yaml"
ASYNCAPI = ROOT / "asyncapi.yaml"
SCHEMAS = ROOT / "schemas"
SCHEMA_FILES = sorted(SCHEMAS.glob("*.json"))
API_MD = ROOT / "docs" / "api.md"

PROBLEM_STATUSES = {400, 401, 403, 404, 406, 408, 409, 410, 413, 415, 422, 429, 503}
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_FORMAT = "application/schema+json;version=2020-12"

Pointer = tuple[str | int, ...]
"""A JSON pointer, as its tokens."""


# --------------------------------------------------------------------------- loading


@cache
def load(path: Path) -> Any:
    """A JSON or YAML file's contents (cached: the files do not change during a run)."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def retrieve(uri: str) -> Resource[Any]:
    """Load a referenced file (only local files are ever referenced)."""
    parts = urlsplit(uri)
    assert parts.scheme == "file", f"only local files may be referenced, not {uri}"
    return Resource.from_contents(load(Path(unquote(parts.path))), DRAFT202012)


REGISTRY: Registry[Any] = Registry(retrieve=retrieve)


def escape(token: str | int) -> str:
    """A JSON pointer token, escaped (RFC 6901) and percent-encoded for a URI fragment."""
    return quote(str(token).replace("~", "~0").replace("/", "~1"), safe="")


def location(path: Path, pointer: Pointer) -> str:
    """The URI of a place in a file (a JSON pointer fragment)."""
    return path.as_uri() + "#" + "".join("/" + escape(token) for token in pointer)


def validator_at(path: Path, pointer: Pointer) -> Draft202012Validator:
    """A validator for the schema at ``pointer`` in ``path``, its refs resolved from there."""
    return Draft202012Validator(
        {"$ref": location(path, pointer)},
        registry=REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def resolve(path: Path, ref: str) -> tuple[Path, Any]:
    """The small resolver: a ``$ref`` made in ``path`` -> (file, the value it points at)."""
    target, _, fragment = ref.partition("#")
    assert "://" not in target, f"{path.name}: {ref} is not a local file"
    file = (path.parent / unquote(target)).resolve() if target else path
    assert file.is_file(), f"{path.name}: {ref}: no file {file}"
    node = load(file)
    if fragment:
        assert fragment.startswith("/"), f"{path.name}: {ref}: only JSON pointer fragments"
        for raw in unquote(fragment[1:]).split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                assert token.isdigit() and int(token) < len(node), f"{path.name}: {ref}"
                node = node[int(token)]
            else:
                assert isinstance(node, dict) and token in node, f"{path.name}: {ref}: no {token}"
                node = node[token]
    return file, node


def deref(path: Path, node: Any) -> Any:
    """``node`` with its ``$ref`` (if it is only a reference) followed, repeatedly."""
    while isinstance(node, dict) and set(node) == {"$ref"}:
        path, node = resolve(path, node["$ref"])
    return node


# Values that are data, not spec: refs and examples are not looked for inside them.
_DATA_KEYS = {"example", "examples", "default", "const", "enum"}


def walk(node: Any, pointer: Pointer = ()) -> Iterator[tuple[Pointer, Any]]:
    """Every (pointer, value) in a document, not descending into examples and constants."""
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in _DATA_KEYS:
                yield from walk(value, (*pointer, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, (*pointer, index))


def refs(path: Path) -> Iterator[str]:
    """Every ``$ref`` in a file."""
    for _pointer, node in walk(load(path)):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            yield node["$ref"]


def reachable(path: Path) -> set[Path]:
    """The files a document refers to, directly or through other files."""
    seen: set[Path] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        for ref in refs(current):
            target = ref.partition("#")[0]
            if target:
                file = (current.parent / target).resolve()
                if file not in seen:
                    seen.add(file)
                    todo.append(file)
    return seen


# --------------------------------------------------------------------------- docs/api.md


def documented_routes() -> set[tuple[str, str]]:
    """(method, path) of every row of docs/api.md's HTTP table, ``...`` expanded."""
    routes: set[tuple[str, str]] = set()
    last = ""
    for line in API_MD.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| (GET|POST|PUT|DELETE|PATCH) \| `([^`]+)` \|", line)
        if match is None:
            continue
        method, path = match.group(1).lower(), match.group(2).split("?")[0]
        if path.startswith("..."):
            rest = path[3:]
            first = "/" + rest.split("/")[1]
            path = last[: last.index(first)] + rest
        else:
            last = path
        routes.add((method, path))
    return routes


def documented_channels() -> dict[str, set[str]]:
    """WebSocket path -> its query parameters, from docs/api.md's WebSocket table."""
    channels: dict[str, set[str]] = {}
    for line in API_MD.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `(/v1/[^`?]+)(?:\?([^`]*))?` \| (?:server → client|both) \|", line)
        if match is not None:
            query = match.group(2) or ""
            channels[match.group(1)] = {p.split("=")[0] for p in query.split("&") if p}
    return channels


def documented_close_codes() -> set[str]:
    """The close codes docs/api.md lists."""
    text = API_MD.read_text(encoding="utf-8")
    paragraph = text[text.index("Close codes:") :].split("\n\n")[0]
    return set(re.findall(r"\b(1000|1001|4\d\d\d)\b", paragraph))


def test_docs_tables_parse() -> None:
    # The parsers above are only as good as their hold on the tables: pin the counts.
    assert len(documented_routes()) == 25
    assert len(documented_channels()) == 4
    assert {"1000", "1001", "4400", "4408", "4429"} <= documented_close_codes()


# --------------------------------------------------------------------------- OpenAPI


def operations() -> Iterator[tuple[str, str, dict[str, Any], list[Any]]]:
    """(method, path, operation, path-level parameters) of openapi.yaml."""
    for path, item in load(OPENAPI)["paths"].items():
        for method in METHODS:
            if method in item:
                yield method, path, item[method], item.get("parameters", [])


def test_openapi_is_a_valid_openapi_3_1_document() -> None:
    spec = load(OPENAPI)
    assert spec["openapi"].startswith("3.1.")
    validate(spec, base_uri=OPENAPI.as_uri(), cls=OpenAPIV31SpecValidator)


def test_openapi_validation_catches_a_broken_document() -> None:
    # The validator is not vacuous: a response without a description is refused.
    spec = json.loads(json.dumps(load(OPENAPI)))
    del spec["paths"]["/healthz"]["get"]["responses"]["200"]["description"]
    with pytest.raises(Exception, match="description"):
        validate(spec, base_uri=OPENAPI.as_uri(), cls=OpenAPIV31SpecValidator)


def test_openapi_has_exactly_the_documented_routes() -> None:
    specified = {(method, path) for method, path, _op, _params in operations()}
    documented = documented_routes()
    assert specified - documented == set(), "routes in openapi.yaml but not in docs/api.md"
    assert documented - specified == set(), "routes in docs/api.md but not in openapi.yaml"


def test_every_operation_is_identified_and_summarised() -> None:
    ids = [op["operationId"] for _m, _p, op, _params in operations()]
    assert len(ids) == len(set(ids))
    for _method, _path, op, _params in operations():
        assert op.get("summary") and op.get("tags"), op["operationId"]


def _response_codes(op: dict[str, Any]) -> set[int]:
    return {int(code) for code in op["responses"] if code.isdigit()}


def test_every_client_error_a_request_can_cause_is_specified() -> None:
    used: set[int] = set()
    for method, path, op, path_params in operations():
        codes = _response_codes(op)
        used |= codes & PROBLEM_STATUSES
        name = f"{method.upper()} {path}"
        if not path.startswith("/v1/"):
            assert op.get("security") == [], f"{name} is public"
            continue
        assert "security" not in op, f"{name} uses the document's bearer security"
        assert {401, 403, 429, 503} <= codes, name  # 429: the tenant's request rate
        if "{" in path:
            assert 404 in codes, name
        if "requestBody" in op:
            assert {400, 408, 413, 422} <= codes, name  # 408: the body's deadline
        params = [deref(OPENAPI, p) for p in [*path_params, *op.get("parameters", [])]]
        if any(p["in"] == "query" and p["name"] != "operators" for p in params):
            assert 400 in codes, name
        if path.startswith("/v1/dataflows/{id}/inputs/{input}"):
            assert 410 in codes, f"{name}: a dropped dataflow or a closed input is gone"
    assert used == PROBLEM_STATUSES


def test_every_error_response_is_a_problem() -> None:
    spec = load(OPENAPI)
    for method, path, op, _params in operations():
        for code, response in op["responses"].items():
            # The probes' 503s are health documents for orchestrators, not client errors.
            if not code.isdigit() or int(code) < 400 or path in ("/readyz", "/healthz"):
                continue
            response = deref(OPENAPI, response)
            content = response["content"]
            assert list(content) == ["application/problem+json"], f"{method} {path} {code}"
            schema = content["application/problem+json"]["schema"]["$ref"]
            expected = "ValidationProblem" if code == "422" else "Problem"
            assert schema == f"#/components/schemas/{expected}", f"{method} {path} {code}"
    validation = spec["components"]["schemas"]["ValidationProblem"]
    assert validation["required"] == ["problems"]


def test_security_scheme_is_bearer() -> None:
    spec = load(OPENAPI)
    scheme = spec["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert spec["security"] == [{"bearer": []}]


def test_path_parameters_are_declared() -> None:
    for method, path, op, path_params in operations():
        declared = {
            p["name"]
            for p in (deref(OPENAPI, q) for q in [*path_params, *op.get("parameters", [])])
            if p["in"] == "path"
        }
        assert declared == set(re.findall(r"\{(\w+)\}", path)), f"{method} {path}"


def test_openapi_names_the_required_components() -> None:
    schemas = load(OPENAPI)["components"]["schemas"]
    for name in (
        "Graph",
        "Dataflow",
        "DataflowSummary",
        "DataflowList",
        "Ack",
        "Session",
        "Time",
        "Record",
        "Problem",
        "Frontier",
        "CreateDataflow",
        "OpenSession",
        "Push",
        "Advance",
        "Commit",
        "InputCommit",
        "Input",
        "OutputTimeCounts",
        "Stage",
    ):
        assert name in schemas, name


# --------------------------------------------------------------------------- AsyncAPI


def test_asyncapi_has_the_required_structure() -> None:
    doc = load(ASYNCAPI)
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["title"] and doc["info"]["version"]
    assert doc["defaultContentType"] == "application/json"
    allowed = {
        "asyncapi",
        "id",
        "info",
        "servers",
        "defaultContentType",
        "channels",
        "operations",
        "components",
    }
    assert set(doc) <= allowed
    for name, server in doc["servers"].items():
        assert server["host"] and server["protocol"] in ("ws", "wss"), name
        for requirement in server["security"]:
            scheme = deref(ASYNCAPI, requirement)
            assert scheme == {**scheme, "type": "http", "scheme": "bearer"}


def test_asyncapi_has_exactly_the_documented_channels() -> None:
    channels = load(ASYNCAPI)["channels"]
    by_address = {channel["address"]: channel for channel in channels.values()}
    documented = documented_channels()
    assert set(by_address) == set(documented)
    for address, query in documented.items():
        binding = by_address[address]["bindings"]["ws"]
        assert binding["method"] == "GET"
        assert set(binding.get("query", {}).get("properties", {})) == query, address


def test_asyncapi_channels_declare_parameters_and_messages() -> None:
    doc = load(ASYNCAPI)
    close_codes = documented_close_codes()
    for name, channel in doc["channels"].items():
        assert set(channel["parameters"]) == set(re.findall(r"\{(\w+)\}", channel["address"]))
        assert channel["messages"], name
        for key, reference in channel["messages"].items():
            message = deref(ASYNCAPI, reference)
            assert message["name"] and message["payload"], f"{name}/{key}"
            payload = message["payload"]
            assert payload["schemaFormat"] == SCHEMA_FORMAT, f"{name}/{key}"
            schema = payload["schema"]
            if "$ref" in schema:
                file, target = resolve(ASYNCAPI, schema["$ref"])
                assert file.parent == SCHEMAS, f"{name}/{key}: messages use schemas/*.json"
                assert isinstance(target, dict) and target, f"{name}/{key}"
            assert message.get("examples"), f"{name}/{key} has examples"
        assert set(channel["x-close-codes"]) <= close_codes, name


def test_asyncapi_operations_use_their_channels_messages() -> None:
    doc = load(ASYNCAPI)
    used: set[tuple[str, str]] = set()
    for name, operation in doc["operations"].items():
        assert operation["action"] in ("send", "receive"), name
        channel_ref = operation["channel"]["$ref"]
        assert channel_ref.startswith("#/channels/"), name
        channel = channel_ref.removeprefix("#/channels/")
        assert channel in doc["channels"], name
        replies = operation.get("reply", {}).get("messages", [])
        for reference in [*operation["messages"], *replies]:
            # AsyncAPI 3: an operation's messages are its channel's, referenced there.
            prefix = f"#/channels/{channel}/messages/"
            assert reference["$ref"].startswith(prefix), f"{name}: {reference['$ref']}"
            key = reference["$ref"].removeprefix(prefix)
            assert key in doc["channels"][channel]["messages"], f"{name}: {key}"
            used.add((channel, key))
    every = {(c, k) for c, channel in doc["channels"].items() for k in channel["messages"]}
    assert used == every, "every message is sent or received by some operation"


def test_the_producer_channel_carries_every_client_frame() -> None:
    doc = load(ASYNCAPI)
    messages = doc["channels"]["inputPush"]["messages"]
    tags = set()
    for reference in messages.values():
        schema = deref(ASYNCAPI, reference)["payload"]["schema"]
        _file, target = resolve(ASYNCAPI, schema["$ref"])
        tags.add(target["properties"]["type"]["const"])
    assert tags == {"session", "push", "advance", "close", "ack", "error"}


# --------------------------------------------------------------------------- refs and schemas

DOCUMENTS = [OPENAPI, ASYNCAPI, *SCHEMA_FILES]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_ref_resolves(path: Path) -> None:
    found = 0
    for ref in refs(path):
        resolve(path, ref)
        found += 1
    if path.suffix == ".yaml":
        assert found > 20
    for file in reachable(path):
        for ref in refs(file):
            resolve(file, ref)


def test_the_resolver_refuses_dangling_refs() -> None:
    with pytest.raises(AssertionError):
        resolve(OPENAPI, "schemas/time.json#/$defs/nothing")
    with pytest.raises(AssertionError):
        resolve(OPENAPI, "schemas/nothing.json")
    with pytest.raises(AssertionError):
        resolve(OPENAPI, "#/components/schemas/Nothing")


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_files_are_json_schema_2020_12(path: Path) -> None:
    schema = load(path)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == JSON_SCHEMA_2020_12
    assert schema["title"] and schema["description"]
    assert "$id" not in schema, "refs between schema files are relative to the file"


def test_the_required_schema_files_exist() -> None:
    names = {path.name for path in SCHEMA_FILES}
    assert {
        "time.json",
        "problem.json",
        "event.json",
        "ack.json",
        "frontier_event.json",
    } <= names


def test_schema_files_are_shared_by_both_documents() -> None:
    from_openapi = reachable(OPENAPI)
    from_asyncapi = reachable(ASYNCAPI)
    for path in SCHEMA_FILES:
        assert path in from_openapi | from_asyncapi, f"{path.name} is not used"
    for name in ("time.json", "frontier.json", "problem.json", "ack.json", "session.json"):
        assert SCHEMAS / name in from_openapi & from_asyncapi, name


# --------------------------------------------------------------------------- examples


def examples(path: Path) -> Iterator[tuple[str, Pointer, Any]]:
    """(label, schema pointer, instance) for every example in a document.

    JSON Schema ``examples`` (lists) illustrate the schema they sit in; OpenAPI ``example``
    and ``examples`` (maps of ``{value}``) of media types and parameters illustrate the
    sibling ``schema``; AsyncAPI message ``examples`` illustrate the message's payload.
    """
    for pointer, node in walk(load(path)):
        if not isinstance(node, dict):
            continue
        here = "#" + "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in pointer)
        if "payload" in node and isinstance(node.get("examples"), list):
            multi_format = "schemaFormat" in node["payload"]
            target = (*pointer, "payload", "schema") if multi_format else (*pointer, "payload")
            for index, example in enumerate(node["examples"]):
                yield f"{here}/examples/{index}", target, example["payload"]
        elif isinstance(node.get("examples"), list):
            for index, example in enumerate(node["examples"]):
                yield f"{here}/examples/{index}", pointer, example
        elif "schema" in node and ("example" in node or isinstance(node.get("examples"), dict)):
            target = (*pointer, "schema")
            if "example" in node:
                yield f"{here}/example", target, node["example"]
            for name, example in node.get("examples", {}).items():
                yield f"{here}/examples/{name}", target, deref(path, example)["value"]


EXAMPLES = [
    pytest.param(path, pointer, instance, id=f"{path.name}:{label}")
    for path in DOCUMENTS
    for label, pointer, instance in examples(path)
]


def test_examples_are_found_everywhere() -> None:
    counts: dict[str, int] = {}
    for param in EXAMPLES:
        name = param.values[0].name
        counts[name] = counts.get(name, 0) + 1
    assert counts.get("openapi.yaml", 0) >= 40
    assert counts.get("asyncapi.yaml", 0) >= 15
    assert all(counts.get(path.name, 0) >= 1 for path in SCHEMA_FILES if path.name != "record.json")


@pytest.mark.parametrize(("path", "pointer", "instance"), EXAMPLES)
def test_example_validates_against_its_schema(path: Path, pointer: Pointer, instance: Any) -> None:
    validator_at(path, pointer).validate(instance)


def _time(instance: Any) -> bool:
    return validator_at(SCHEMAS / "time.json", ()).is_valid(instance)


def test_the_time_schema_is_strict() -> None:
    for good in (0, 2**64 - 1, [0, 0], [[1, 2], 3], [1, [2, [3, 4]]]):
        assert _time(good), good
    for bad in (-1, 2**64, "1", 1.5, True, None, [], [1], [1, 2, 3], [1, "2"], {"a": 1}):
        assert not _time(bad), bad


def test_example_validation_is_not_vacuous() -> None:
    # A wrong instance is caught through refs across files and documents.
    ack = validator_at(OPENAPI, ("components", "schemas", "Ack"))
    assert not ack.is_valid({"seq": 1, "session_time": "0", "input_frontier": [], "applied": 0})
    event = validator_at(ASYNCAPI, ("components", "messages", "eventsClosed", "payload", "schema"))
    assert not event.is_valid({"type": "closed", "reason": "x"})  # no resume
    assert event.is_valid({"type": "closed", "reason": "x", "resume": [[1, 0]]})
    with pytest.raises(jsonschema.ValidationError):
        validator_at(SCHEMAS / "event.json", ()).validate({"type": "progress", "changes": [[0, 0]]})


# --------------------------------------------------------------------------- models vs schemas

COMPONENTS = ("components", "schemas")
BODIES: dict[str, tuple[type[BaseModel] | TypeAdapter[Any], Path, Pointer]] = {
    "createDataflow": (models.CreateDataflow, OPENAPI, (*COMPONENTS, "CreateDataflow")),
    "openSession": (models.OpenSession, OPENAPI, (*COMPONENTS, "OpenSession")),
    "pushRecords": (models.Push, SCHEMAS / "push.json", ()),
    "advanceSession": (models.Advance, SCHEMAS / "advance.json", ()),
    "commitTransactions": (models.Commit, OPENAPI, (*COMPONENTS, "Commit")),
    "commitInputTransactions": (models.InputCommit, OPENAPI, (*COMPONENTS, "InputCommit")),
    "stageRecords": (models.Stage, OPENAPI, (*COMPONENTS, "Stage")),
    "commitConsumer": (models.ConsumerCommit, OPENAPI, (*COMPONENTS, "ConsumerCommit")),
    "clientFrame": (models.ClientFrame, SCHEMAS / "client_frame.json", ()),
}

GRAPH = {"nodes": {"in": {"op": "input"}, "out": {"op": "output"}}, "edges": [["in", "out"]]}

# (body kind, instance): pydantic and the JSON Schema must agree on each. Graphs are only
# checked for shape by the schema and compiled by the server, so they are kept valid here;
# JSON Schema's "integer" also admits 1.0, which pydantic's strict mode refuses: not listed.
AGREEMENT: list[tuple[str, Any]] = [
    ("createDataflow", {"graph": GRAPH}),
    ("createDataflow", {"graph": GRAPH, "name": "n"}),
    ("createDataflow", {"graph": GRAPH, "name": None}),
    ("createDataflow", {"graph": GRAPH, "name": "x" * 200}),
    ("createDataflow", {"graph": GRAPH, "name": "x" * 201}),
    ("createDataflow", {"graph": GRAPH, "name": 5}),
    ("createDataflow", {"graph": GRAPH, "extra": 1}),
    ("createDataflow", {"graph": [GRAPH]}),
    ("createDataflow", {"name": "no graph"}),
    ("createDataflow", []),
    ("openSession", {}),
    ("openSession", {"start": None}),
    ("openSession", {"start": 3}),
    ("openSession", {"start": [[1, 2], 3]}),
    ("openSession", {"start": "3"}),
    ("openSession", {"start": -3}),
    ("openSession", {"start": 2**64}),
    ("openSession", {"start": [1]}),
    ("openSession", {"begin": 3}),
    ("pushRecords", {"seq": 1, "records": []}),
    ("pushRecords", {"seq": 1, "records": [[0, None], [[1, 2], {"a": [1]}], [5, "x"]]}),
    ("pushRecords", {"seq": 0, "records": []}),
    ("pushRecords", {"seq": "1", "records": []}),
    ("pushRecords", {"seq": True, "records": []}),
    ("pushRecords", {"seq": 1, "records": [[0]]}),
    ("pushRecords", {"seq": 1, "records": [[0, 1, 2]]}),
    ("pushRecords", {"seq": 1, "records": [["0", 1]]}),
    ("pushRecords", {"seq": 1, "records": [[1.5, 1]]}),
    ("pushRecords", {"seq": 1, "records": {"0": 1}}),
    ("pushRecords", {"seq": 1}),
    ("pushRecords", {"seq": 1, "records": [], "type": "push"}),
    ("advanceSession", {"time": 4}),
    ("advanceSession", {"time": [4, 0], "seq": 2}),
    ("advanceSession", {"time": 4, "seq": None}),
    ("advanceSession", {"time": 4, "seq": 0}),
    ("advanceSession", {"time": None}),
    ("advanceSession", {"seq": 2}),
    ("advanceSession", {"time": False}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k"}),
    ("commitTransactions", {"transactions": ["a", "b"], "idempotency_key": "k", "advance_to": 3}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "advance_to": None}),
    ("commitTransactions", {"transactions": [], "idempotency_key": "k"}),
    ("commitTransactions", {"transactions": ["a", "a"], "idempotency_key": "k"}),
    ("commitTransactions", {"transactions": [""], "idempotency_key": "k"}),
    (
        "commitTransactions",
        {"transactions": [str(i) for i in range(1001)], "idempotency_key": "k"},
    ),
    ("commitTransactions", {"transactions": [str(i) for i in range(1000)], "idempotency_key": "k"}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": ""}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k" * 201}),
    ("commitTransactions", {"transactions": ["a"]}),
    ("commitTransactions", {"transactions": [1], "idempotency_key": "k"}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "advance_to": "1"}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "discard": ["b"]}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "discard": []}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "discard": [""]}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "discard": "b"}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k"}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "advance_to": 3}),
    (
        "commitInputTransactions",
        {"transactions": ["a"], "idempotency_key": "k", "advance_to": [1, 0], "discard": ["a"]},
    ),
    ("commitInputTransactions", {"transactions": ["a", "a"], "idempotency_key": "k"}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": "ab12"}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": None}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": ""}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": "a b"}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": "a" * 129}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "digest": 5}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "dropped": 3}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "dropped": -1}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "dropped": 2**63}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "dropped": "3"}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "digest": "sha:f0"}),
    ("commitTransactions", {"transactions": ["a"], "idempotency_key": "k", "dropped": None}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": ""}),
    ("commitInputTransactions", {"transactions": []}),
    ("commitInputTransactions", {"transactions": [], "idempotency_key": "k", "session": "s"}),
    ("commitInputTransactions", {"transactions": ["b" * 201], "idempotency_key": "k"}),
    ("stageRecords", {"records": [[0, "a"]]}),
    ("stageRecords", {"records": []}),
    ("stageRecords", {"records": [[0, "a"]], "seq": 1}),
    ("stageRecords", {"records": [[-1, "a"]]}),
    ("commitConsumer", {"committed": 5}),
    ("commitConsumer", {"committed": None}),
    ("commitConsumer", {}),
    ("commitConsumer", {"committed": [2, 0]}),
    ("commitConsumer", {"committed": -1}),
    ("commitConsumer", {"committed": "5"}),
    ("commitConsumer", {"committed": 5, "extra": 1}),
    ("clientFrame", {"type": "push", "seq": 1, "records": [[0, "a"]]}),
    ("clientFrame", {"type": "advance", "seq": 2, "time": [1, 0]}),
    ("clientFrame", {"type": "close"}),
    ("clientFrame", {"type": "advance", "time": 1}),
    ("clientFrame", {"type": "push", "seq": 1}),
    ("clientFrame", {"type": "close", "seq": 1}),
    ("clientFrame", {"type": "ack"}),
    ("clientFrame", {"seq": 1, "records": []}),
    ("clientFrame", {"type": "push", "seq": 1, "records": [[[1], "a"]]}),
]


def _model_accepts(model: type[BaseModel] | TypeAdapter[Any], instance: Any) -> bool:
    data = json.dumps(instance).encode()
    try:
        if isinstance(model, TypeAdapter):
            model.validate_json(data)
        else:
            model.model_validate_json(data)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("kind", "instance"), AGREEMENT, ids=lambda v: str(v)[:60])
def test_models_agree_with_the_schemas(kind: str, instance: Any) -> None:
    model, path, pointer = BODIES[kind]
    schema_accepts = validator_at(path, pointer).is_valid(instance)
    assert _model_accepts(model, instance) == schema_accepts


def test_agreement_covers_both_answers_for_every_body() -> None:
    for kind, (model, _path, _pointer) in BODIES.items():
        answers = {_model_accepts(model, i) for k, i in AGREEMENT if k == kind}
        assert answers == {True, False}, kind


def test_every_request_example_is_accepted_by_its_model() -> None:
    checked = 0
    for _method, _path, op, _params in operations():
        if "requestBody" not in op:
            continue
        model = BODIES[op["operationId"]][0]
        media = op["requestBody"]["content"]["application/json"]
        values = [media["example"]] if "example" in media else []
        values += [deref(OPENAPI, e)["value"] for e in media.get("examples", {}).values()]
        assert values, op["operationId"]
        for value in values:
            assert _model_accepts(model, value), (op["operationId"], value)
            checked += 1
    for key in ("push", "advance", "close"):
        message = deref(ASYNCAPI, load(ASYNCAPI)["channels"]["inputPush"]["messages"][key])
        for example in message["examples"]:
            assert _model_accepts(models.ClientFrame, example["payload"]), example
            checked += 1
    assert checked >= 10


# --------------------------------------------------------------------------- the core's answers


def test_service_errors_are_specified_problems() -> None:
    import api.server.arrow
    import api.server.problems  # noqa: F401 - the API's own errors are service errors too

    problem = validator_at(OPENAPI, (*COMPONENTS, "Problem"))
    kinds = [errors.ServiceError]
    for kind in kinds:  # every subclass, at any depth (grows while it is walked)
        kinds.extend(k for k in kind.__subclasses__() if k not in kinds)
    slugs = {k.slug for k in kinds}
    assert {"idempotency-key-reused", "not-acceptable", "unsupported-media-type"} <= slugs
    for kind in kinds:
        document = {
            "type": f"https://frontier.dev/problems/{kind.slug}",
            "title": kind.title,
            "status": kind.status,
            "detail": "something",
        }
        problem.validate(document)
        assert kind.status in PROBLEM_STATUSES, kind.__name__
    invalid = errors.Invalid("2 problems", [{"pointer": "/nodes/x/op", "detail": "unknown"}])
    validator_at(OPENAPI, (*COMPONENTS, "ValidationProblem")).validate(
        {
            "type": "https://frontier.dev/problems/invalid",
            "title": invalid.title,
            "status": invalid.status,
            "detail": invalid.detail,
            **invalid.extra,
        }
    )


def test_the_catalogue_matches_its_schema() -> None:
    catalogue = {"operators": describe_catalogue()}
    validator_at(OPENAPI, (*COMPONENTS, "OperatorCatalogue")).validate(catalogue)


# --------------------------------------------------------------------------- operators


def _param_schema_problems(name: str, schema: dict[str, Any], params: list[Param]) -> list[str]:
    """How the Node schema's property ``name`` differs from the registry's ``params``."""
    problems: list[str] = []
    for param in params:
        wanted: dict[str, Any] = {}
        if param.kind == "expr":
            wanted = {"type": "string"}
        elif param.kind == "int":
            wanted = {"type": "integer", "minimum": param.minimum, "maximum": param.maximum}
        elif param.kind == "choice":
            wanted = {"enum": list(param.choices)}
        found = {key: schema.get(key) for key in wanted}
        if found != wanted:
            problems.append(f"Node.{name}: {found} in openapi.yaml, {wanted} in the registry")
    return problems


def _param_names(registry: Mapping[str, OpKind]) -> dict[str, list[str]]:
    """Every parameter name of ``registry``, with the operators taking it."""
    holders: dict[str, list[str]] = {}
    for op, kind in registry.items():
        for name in kind.params:
            holders.setdefault(name, []).append(op)
    return holders


def _node_schema_problems(registry: Mapping[str, OpKind], node: dict[str, Any]) -> list[str]:
    """How the Node schema's ``op`` and parameter properties differ from ``registry``."""
    problems: list[str] = []
    if sorted(node["op"]["examples"]) != sorted(registry):
        problems.append(f"Node.op names {sorted(node['op']['examples'])}, not {sorted(registry)}")
    holders = _param_names(registry)
    declared = set(node) - {"op", "scope"}
    if declared != set(holders):
        problems.append(f"Node declares {sorted(declared)}, the registry {sorted(holders)}")
    for name in sorted(declared & set(holders)):
        problems.extend(
            _param_schema_problems(
                name, node[name], [registry[op].params[name] for op in holders[name]]
            )
        )
        # on_error is described once for all: it is what the operators with expressions take.
        if name != "on_error":
            named = set(re.findall(r"\w+", node[name]["description"]))
            problems.extend(
                f"Node.{name}'s description does not name {op}"
                for op in holders[name]
                if op not in named
            )
    with_expressions = [
        op for op, kind in registry.items() if any(p.kind == "expr" for p in kind.params.values())
    ]
    if holders.get("on_error", []) != with_expressions:
        problems.append("on_error is not taken by exactly the operators with expressions")
    return problems


def operator_schema_problems(registry: Mapping[str, OpKind]) -> list[str]:
    """How openapi.yaml's operator schemas differ from ``registry`` (empty: they do not)."""
    schemas = load(OPENAPI)["components"]["schemas"]
    problems = _node_schema_problems(registry, schemas["Node"]["properties"])
    kind_schema = schemas["OperatorKind"]
    enum = kind_schema["properties"]["params"]["additionalProperties"]["properties"]["kind"]
    if enum["enum"] != list(PARAM_KINDS):
        problems.append(f"OperatorKind's parameter kinds are {enum['enum']}, not {PARAM_KINDS}")
    problems.extend(
        f"the OperatorKind example of {example['op']} is not the registry's"
        for example in kind_schema["examples"]
        if example["op"] not in registry or example != describe_kind(registry[example["op"]])
    )
    return problems


def test_the_operator_schemas_are_the_registrys() -> None:
    assert operator_schema_problems(CATALOGUE) == []


def test_operator_schema_drift_is_reported() -> None:
    registry = dict(CATALOGUE)
    del registry["inspect"]
    partition = registry["partition"]
    registry["partition"] = replace(
        partition, params={**partition.params, "parts": Param("int", minimum=1, maximum=64)}
    )
    registry["map"] = replace(registry["map"], params={"expr": Param("expr", variables=("x",))})
    registry["tally"] = OpKind("tally", 1, 1, {"by": Param("json")}, builder=lambda i, p: i)
    assert operator_schema_problems(registry) == [
        f"Node.op names {sorted(CATALOGUE)}, not {sorted(registry)}",
        f"Node declares {sorted(_param_names(CATALOGUE))}, "
        f"the registry {sorted(_param_names(registry))}",
        "Node.parts: {'type': 'integer', 'minimum': 1, 'maximum': 1024} in openapi.yaml, "
        "{'type': 'integer', 'minimum': 1, 'maximum': 64} in the registry",
        "on_error is not taken by exactly the operators with expressions",
        "the OperatorKind example of map is not the registry's",
        "the OperatorKind example of partition is not the registry's",
    ]


def test_a_plan_and_a_summary_match_their_schemas() -> None:
    graph = load(OPENAPI)["components"]["schemas"]["Graph"]["examples"][1]
    plan = compile_graph(parse_graph(graph))
    validator_at(OPENAPI, (*COMPONENTS, "DryRun")).validate({"plan": plan.describe()})
    summary = summary_of(Identity("9f1c", "default", "loop", graph), plan)
    validator_at(OPENAPI, (*COMPONENTS, "DataflowSummary")).validate(summary_json(summary))


def graph_examples() -> Iterator[Any]:
    """Every example graph in openapi.yaml: a graph, a body's graph, a dataflow's graph."""
    schemas = load(OPENAPI)["components"]["schemas"]
    yield from schemas["Graph"]["examples"]
    yield from (dataflow["graph"] for dataflow in schemas["Dataflow"]["examples"])
    create = load(OPENAPI)["paths"]["/v1/dataflows"]["post"]["requestBody"]
    for example in create["content"]["application/json"]["examples"].values():
        yield example["value"]["graph"]


@pytest.mark.parametrize("graph", list(graph_examples()))
def test_graph_examples_compile(graph: Any) -> None:
    compile_graph(parse_graph(graph))
