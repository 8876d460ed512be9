"""The server's routes against the contract files.

Every HTTP route of the aiohttp application is an operation of openapi.yaml and every
operation there has a route, with the same path template (so the same path parameter names);
the WebSocket routes are exactly asyncapi.yaml's channels instead, and none of them is in
openapi.yaml. HEAD routes are aiohttp's automatic companions of GET routes and are not listed.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from api.server import create_app
from api.server import stats as stats_handlers
from api.server import websockets as websocket_handlers
from service.app import Settings

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "openapi.yaml"
ASYNCAPI = ROOT / "asyncapi.yaml"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")

Route = tuple[str, str]
"""(METHOD, path template)."""


@cache
def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def deref(document: Any, node: Any) -> Any:
    """``node`` with a local ``$ref`` (``#/...``) followed, repeatedly."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"only local refs are expected here, not {ref}"
        node = document
        for token in ref[2:].split("/"):
            node = node[token.replace("~1", "/").replace("~0", "~")]
    return node


@cache
def app() -> web.Application:
    return create_app(Settings())


def is_websocket(route: web.AbstractRoute) -> bool:
    modules = {websocket_handlers.__name__, stats_handlers.__name__}
    return getattr(route.handler, "__module__", None) in modules


def server_routes(*, websocket: bool) -> set[Route]:
    routes: set[Route] = set()
    for route in app().router.routes():
        if route.method == "HEAD" or is_websocket(route) != websocket:
            continue
        resource = route.resource
        assert resource is not None
        routes.add((route.method, resource.canonical))
    return routes


def spec_operations() -> set[Route]:
    paths = load(OPENAPI)["paths"]
    return {
        (method.upper(), path)
        for path, item in paths.items()
        for method in item
        if method in METHODS
    }


def test_the_app_has_routes_of_both_kinds() -> None:
    assert len(server_routes(websocket=False)) >= 17
    assert len(server_routes(websocket=True)) == 4
    # HEAD routes exist (aiohttp adds them for GET) and are what is left out.
    assert any(route.method == "HEAD" for route in app().router.routes())


def test_every_route_is_in_openapi() -> None:
    missing = server_routes(websocket=False) - spec_operations()
    assert not missing, f"routes of the server that openapi.yaml lacks: {sorted(missing)}"


def test_every_openapi_operation_has_a_route() -> None:
    missing = spec_operations() - server_routes(websocket=False)
    assert not missing, f"operations of openapi.yaml the server lacks: {sorted(missing)}"


def test_openapi_path_parameters_are_the_template_placeholders() -> None:
    document = load(OPENAPI)
    for path, item in document["paths"].items():
        placeholders = set(PLACEHOLDER.findall(path))
        shared = [deref(document, p) for p in item.get("parameters", [])]
        for method in (m for m in item if m in METHODS):
            own = [deref(document, p) for p in item[method].get("parameters", [])]
            declared = {p["name"] for p in shared + own if p["in"] == "path"}
            assert declared == placeholders, (method.upper(), path, declared)
            for parameter in shared + own:
                if parameter["in"] == "path":
                    assert parameter.get("required") is True, (path, parameter["name"])


def asyncapi_channels() -> set[Route]:
    channels = load(ASYNCAPI)["channels"]
    return {
        (channel["bindings"]["ws"]["method"].upper(), channel["address"])
        for channel in channels.values()
    }


def test_websocket_routes_are_the_asyncapi_channels() -> None:
    assert server_routes(websocket=True) == asyncapi_channels()


def test_websocket_routes_are_not_in_openapi() -> None:
    paths = load(OPENAPI)["paths"]
    for _method, path in server_routes(websocket=True):
        assert path not in paths, path


def test_asyncapi_channel_parameters_are_the_address_placeholders() -> None:
    for name, channel in load(ASYNCAPI)["channels"].items():
        placeholders = set(PLACEHOLDER.findall(channel["address"]))
        assert set(channel.get("parameters", {})) == placeholders, name
