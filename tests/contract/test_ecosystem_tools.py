"""The contracts load in their own ecosystems' tools, not only in ours.

* ``asyncapi.yaml`` parses with ``@asyncapi/parser`` 3 (what AsyncAPI Studio, the generator
  and the CLI use), with no error and no warning, and finds exactly the channels, operations
  and messages the document declares;
* ``openapi.yaml`` validates with ``@apidevtools/swagger-parser``, a second validator besides
  ``openapi-spec-validator`` (tests/contract/test_spec_files.py), and has the routes of
  docs/api.md;
* a broken copy of each is refused, so neither check is vacuous;
* no schema in ``schemas/`` refers to itself, directly or through others: those tools inline
  referenced files, and on the recursive Time (``$ref: "#"`` in ``schemas/time.json``) the
  AsyncAPI parser spun for over ten minutes. Time is bounded instead, by the service's own
  limits (:data:`MAX_TIME_DEPTH` products in a time domain, one more per nested scope).

The npm packages (pinned in ``tests/contract/node/package-lock.json``) are installed with
``npm ci`` into ``.cache/node-tools`` (or ``$FRONTIER_NODE_TOOLS``), once per change of the
lock file. Where Node.js or npm is missing the Node tests are skipped, saying so (``.ci/run``
installs Debian's ``nodejs`` and ``npm``); where npm cannot install them (no registry, an
npm too old for the lock file) they are skipped too, saying what npm said: the machine's
tools are missing, not the contracts wrong.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from operators.graph.spec import MAX_SCOPE_DEPTH, MAX_TIME_DEPTH
from tests.contract.test_spec_files import (
    ASYNCAPI,
    OPENAPI,
    SCHEMA_FILES,
    SCHEMAS,
    deref,
    documented_channels,
    documented_routes,
    load,
)

ROOT = Path(__file__).resolve().parents[2]
NODE_PROJECT = Path(__file__).parent / "node"
SCRIPT = NODE_PROJECT / "load_contracts.js"
CACHE = Path(os.environ.get("FRONTIER_NODE_TOOLS", ROOT / ".cache" / "node-tools"))
OLDEST_NODE = 18
"""Debian 12's Node.js, what .ci/run installs on a fresh machine."""
INSTALL_TIMEOUT = 600.0
LOAD_TIMEOUT = 120.0
"""Seconds a document may take to load: a few on this machine; the recursive Time never ended."""


# --------------------------------------------------------------------------- the tools


def _node_version(node: str) -> int:
    found = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    match = re.match(r"v(\d+)\.", found.stdout.strip())
    return int(match.group(1)) if match else 0


def _install(npm: str) -> None:
    """``npm ci`` the pinned packages into :data:`CACHE`, unless the lock file is unchanged."""
    files = ("package.json", "package-lock.json")
    stamp = hashlib.sha256(b"".join((NODE_PROJECT / f).read_bytes() for f in files)).hexdigest()
    marker = CACHE / "node_modules" / ".frontier-installed"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (pytest-xdist, two runs)
        if marker.is_file() and marker.read_text() == stamp:
            return
        for name in files:
            shutil.copyfile(NODE_PROJECT / name, CACHE / name)
        command = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
        try:
            done = subprocess.run(
                command, cwd=CACHE, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
            )
            problem = done.stderr.strip()[-2000:] if done.returncode else ""
        except subprocess.TimeoutExpired:
            problem = f"npm ci did not finish in {INSTALL_TIMEOUT:.0f} s"
        if problem:
            pytest.skip(f"npm could not install the contract tools into {CACHE}: {problem}")
        marker.write_text(stamp)


@pytest.fixture(scope="module")
def node_tools() -> Iterator[tuple[str, Path]]:
    """(the node executable, the node_modules with the contract tools), or a skip saying why."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        pytest.skip(
            f"Node.js is not installed ({missing} not found): the contracts are not loaded in "
            "@asyncapi/parser and swagger-parser (apt-get install nodejs npm; .ci/run does)"
        )
    version = _node_version(node)
    if version < OLDEST_NODE:
        pytest.skip(f"Node.js {version} is older than {OLDEST_NODE}, which the contract tools need")
    _install(npm)
    yield node, CACHE / "node_modules"


def load_in_node(tools: tuple[str, Path], kind: str, path: Path) -> dict[str, Any]:
    """What ``load_contracts.js`` found loading ``path`` (``kind``: asyncapi or openapi)."""
    node, modules = tools
    env = {**os.environ, "NODE_PATH": str(modules)}
    try:
        done = subprocess.run(
            [node, str(SCRIPT), kind, str(path)],
            capture_output=True,
            text=True,
            timeout=LOAD_TIMEOUT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name} did not load in {LOAD_TIMEOUT:.0f} s (a recursive schema?)")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def broken_copy(tmp_path: Path, document: Path, change: Any) -> Path:
    """A copy of ``document`` (and the schemas it refers to) with ``change`` applied to it."""
    shutil.copytree(SCHEMAS, tmp_path / "schemas")
    spec = copy.deepcopy(load(document))
    change(spec)
    target = tmp_path / document.name
    target.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return target


# --------------------------------------------------------------------------- AsyncAPI


def declared_operations() -> list[str]:
    return sorted(f"{op['action']} {name}" for name, op in load(ASYNCAPI)["operations"].items())


def declared_messages() -> list[str]:
    """The names of the messages the channels carry, as the parser lists them.

    A message two channels carry (the same component) is listed once.
    """
    channels = load(ASYNCAPI)["channels"].values()
    refs = {r["$ref"]: r for c in channels for r in c["messages"].values()}
    return sorted(deref(ASYNCAPI, r)["name"] for r in refs.values())


def test_asyncapi_parses_with_the_asyncapi_parser(node_tools: tuple[str, Path]) -> None:
    answer = load_in_node(node_tools, "asyncapi", ASYNCAPI)
    serious = [d for d in answer["diagnostics"] if d["severity"] in ("Error", "Warning")]
    assert serious == [], serious
    assert answer["parsed"] is True
    assert answer["version"] == load(ASYNCAPI)["asyncapi"]
    assert answer["channels"] == sorted(documented_channels())
    assert answer["operations"] == declared_operations()
    assert answer["messages"] == declared_messages()
    assert len(answer["channels"]) >= 3 and len(answer["operations"]) >= 4
    assert {"frontier", "messages", "progress", "push", "ack"} <= set(answer["messages"])


def test_the_asyncapi_parser_refuses_a_broken_document(
    node_tools: tuple[str, Path], tmp_path: Path
) -> None:
    def change(spec: dict[str, Any]) -> None:
        spec["operations"]["sendFrontiers"]["channel"] = {"$ref": "#/channels/nothing"}

    answer = load_in_node(node_tools, "asyncapi", broken_copy(tmp_path, ASYNCAPI, change))
    assert answer["parsed"] is False
    errors = [d for d in answer["diagnostics"] if d["severity"] == "Error"]
    assert any("nothing" in d["message"] for d in errors), errors


# --------------------------------------------------------------------------- OpenAPI


def test_openapi_validates_with_swagger_parser(node_tools: tuple[str, Path]) -> None:
    answer = load_in_node(node_tools, "openapi", OPENAPI)
    assert answer.get("error") is None
    assert answer["valid"] is True
    assert answer["version"] == load(OPENAPI)["openapi"]
    assert answer["paths"] == len(load(OPENAPI)["paths"])
    found = {tuple(op.lower().split(" ")) for op in answer["operations"]}
    assert found == documented_routes()
    assert len(answer["operations"]) == len(found)


def test_swagger_parser_refuses_a_broken_document(
    node_tools: tuple[str, Path], tmp_path: Path
) -> None:
    def change(spec: dict[str, Any]) -> None:
        del spec["paths"]["/healthz"]["get"]["responses"]["200"]["description"]

    answer = load_in_node(node_tools, "openapi", broken_copy(tmp_path, OPENAPI, change))
    assert answer["valid"] is False
    assert "description" in answer["error"], answer["error"]


# --------------------------------------------------------------------------- no recursion


_DATA_KEYS = ("examples", "example", "const", "enum", "default")


def _refs_in(node: Any) -> Iterator[str]:
    """Every ``$ref`` in a part of a document, not looking inside data (examples, constants)."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for key, value in node.items():
            if key not in _DATA_KEYS:
                yield from _refs_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs_in(value)


def ref_cycle(path: Path) -> list[str]:
    """A cycle of ``$ref`` reachable from ``path``'s root, as ``file#fragment`` places; or [].

    A cycle within a YAML document (a named component whose own refs reach it again, as
    openapi.yaml's ``TimeDomain``) is allowed: the tools resolve such refs in place. A cycle
    through a referenced file is not: they inline the file, again and again.
    """
    Place = tuple[Path, str]

    def targets(place: Place) -> Iterator[Place]:
        file, fragment = place
        node = load(file)
        for token in (t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/") if t):
            node = node[int(token)] if isinstance(node, list) else node[token]
        for ref in _refs_in(node):
            target, _, sub = ref.partition("#")
            yield (file.parent / target).resolve() if target else file, sub

    def walk(place: Place, stack: list[Place], done: set[Place]) -> list[Place]:
        if place in stack:
            cycle = [*stack[stack.index(place) :], place]
            inside_document = path.suffix == ".yaml" and all(f == root for f, _ in cycle)
            return [] if inside_document else cycle
        if place in done:
            return []
        for target in targets(place):
            cycle = walk(target, [*stack, place], done)
            if cycle:
                return cycle
        done.add(place)
        return []

    root = path.resolve()
    return [f"{file.name}#{fragment}" for file, fragment in walk((root, ""), [], set())]


@pytest.mark.parametrize("path", [ASYNCAPI, OPENAPI, *SCHEMA_FILES], ids=lambda p: p.name)
def test_no_schema_refers_to_itself(path: Path) -> None:
    assert ref_cycle(path) == []


def test_the_cycle_check_finds_the_recursive_time(tmp_path: Path) -> None:
    # The Time schema as it was: an integer, or an array of two times, each a "$ref": "#".
    (tmp_path / "time.json").write_text(
        json.dumps({"oneOf": [{"type": "integer"}, {"prefixItems": [{"$ref": "#"}] * 2}]})
    )
    (tmp_path / "frontier.json").write_text(json.dumps({"items": {"$ref": "time.json"}}))
    assert ref_cycle(tmp_path / "frontier.json") == ["time.json#", "time.json#"]
    # ... and through a named definition too.
    (tmp_path / "defs.json").write_text(
        json.dumps({"$ref": "#/$defs/t", "$defs": {"t": {"items": {"$ref": "#/$defs/t"}}}})
    )
    assert ref_cycle(tmp_path / "defs.json") == ["defs.json#/$defs/t", "defs.json#/$defs/t"]


def _nested(depth: int) -> Any:
    time: Any = 7
    for _ in range(depth):
        time = [time, 0]
    return time


def test_the_time_schema_is_bounded_by_the_service_limits() -> None:
    # The deepest time: a time domain of MAX_TIME_DEPTH products, inside MAX_SCOPE_DEPTH
    # iterative scopes that add a coordinate each. The schema takes it and nothing deeper.
    deepest = MAX_TIME_DEPTH + MAX_SCOPE_DEPTH
    schema = load(SCHEMAS / "time.json")
    validator = Draft202012Validator(schema)
    assert validator.is_valid(_nested(deepest))
    assert validator.is_valid([_nested(deepest - 1), _nested(deepest - 1)])
    assert not validator.is_valid(_nested(deepest + 1))
    assert not validator.is_valid([0, _nested(deepest)])
    # Level by level: depthK is a time at most K deep, each level refers to the one below.
    levels = schema["$defs"]
    assert list(levels) == [f"depth{k}" for k in range(deepest)]
    assert schema["items"] == {"$ref": f"#/$defs/depth{deepest - 1}"}
    for k in range(1, deepest):
        assert levels[f"depth{k}"] == {
            **levels[f"depth{k}"],
            "items": {"$ref": f"#/$defs/depth{k - 1}"},
        }
        assert {key: v for key, v in levels[f"depth{k}"].items() if key != "items"} == {
            key: v for key, v in schema.items() if key in levels[f"depth{k}"] and key != "items"
        }
    assert levels["depth0"] == {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}
