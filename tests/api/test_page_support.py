"""What the dataflow page needs of the server: its files, a token a browser's WebSocket can
send, and an output's readers.

The page at ``/ui/`` is served without a token (it holds no data); every API call still needs
one, and a WebSocket takes it as the ``frontier.bearer.<base64url>`` subprotocol, since a
browser cannot set an ``Authorization`` header on one.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import WSServerHandshakeError
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from api.server.ui import ASSETS, HERE
from service.app import Settings

GRAPH = {"nodes": {"i": {"op": "input"}, "o": {"op": "output"}}, "edges": [["i", "o"]]}
TOKEN = "s3cret/+=é"
"""Characters a subprotocol may not carry as they are: the page sends base64url."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings(tokens={TOKEN: "alice"})
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as c:
        yield c


def bearer_protocol(token: str) -> str:
    return "frontier.bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


async def test_the_page_and_its_files_need_no_token(client: TestClient[Any, Any]) -> None:
    page = await client.get("/ui/")
    assert page.status == 200
    assert page.content_type == "text/html"
    html = await page.text()
    assert "app.js" in html and "elk.bundled.js" in html
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    for name, asset in ASSETS.items():
        response = await client.get(f"/ui/{name}")
        assert (response.status, response.content_type) == (200, asset.content_type), name
        again = await client.get(f"/ui/{name}", headers={"If-None-Match": response.headers["ETag"]})
        assert again.status == 304, name


async def test_only_the_listed_files_are_served(client: TestClient[Any, Any]) -> None:
    for name in ("nope.js", "ui.py", "..%2Fauth.py", "vendor"):
        response = await client.get(f"/ui/{name}")
        assert response.status == 404, name
        assert response.content_type == "application/problem+json"
    # The API itself still needs the token.
    assert (await client.get("/v1/dataflows")).status == 401


async def test_a_websocket_takes_the_token_as_a_subprotocol(client: TestClient[Any, Any]) -> None:
    created = await client.post("/v1/dataflows", json={"graph": GRAPH}, headers=AUTH)
    dataflow = (await created.json())["id"]
    path = f"/v1/dataflows/{dataflow}/frontiers"
    async with client.ws_connect(path, protocols=("frontier", bearer_protocol(TOKEN))) as ws:
        assert ws.protocol == "frontier"  # selected; the token is never echoed
        frame = orjson.loads(await ws.receive_bytes(timeout=5))
        assert frame["type"] == "frontier"
    for protocols in (
        ("frontier", bearer_protocol("wrong")),
        ("frontier",),
        ("frontier.bearer.*",),
    ):
        with pytest.raises(WSServerHandshakeError) as refused:
            await client.ws_connect(path, protocols=protocols)
        assert refused.value.status == 401, protocols
    # A client that offers no subprotocol (the header way) gets none.
    async with client.ws_connect(path, headers=AUTH) as ws:
        assert ws.protocol is None


async def test_an_output_lists_its_subscribers_and_consumers(client: TestClient[Any, Any]) -> None:
    created = await client.post("/v1/dataflows", json={"graph": GRAPH}, headers=AUTH)
    dataflow = (await created.json())["id"]
    output = f"/v1/dataflows/{dataflow}/outputs/o"
    assert (await client.put(f"{output}/consumers/b", json={"committed": 2}, headers=AUTH)).ok
    assert (await client.put(f"{output}/consumers/a", json={"committed": None}, headers=AUTH)).ok
    async with client.ws_connect(f"{output}/events", headers=AUTH):
        # Subscribed before the upgrade was answered: it is listed at once.
        answer = await client.get(output, headers=AUTH)
        assert await answer.json() == {
            "output": "o",
            "frontier": [0],
            "records_out": 0,
            "retained": 0,
            "subscribers": [{"queued": 0, "resume": [0]}],
            "consumers": [
                {"consumer": "a", "committed": None},
                {"consumer": "b", "committed": 2},
            ],
        }
    missing = await client.get(f"/v1/dataflows/{dataflow}/outputs/nope", headers=AUTH)
    assert missing.status == 404


def test_every_file_of_the_page_is_package_data() -> None:
    # An installed server (a wheel, not this checkout) must have every file it serves.
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["api.server"]
    for name, asset in ASSETS.items():
        assert (HERE / asset.path).is_file(), name
        relative = f"ui/{asset.path}"
        assert any(glob_match(relative, p) for p in patterns), (name, relative, patterns)


def glob_match(path: str, pattern: str) -> bool:
    """Whether ``pattern`` matches ``path`` as setuptools' globs do (``*`` within a folder)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


def test_the_vendored_files_are_the_ones_the_readme_names() -> None:
    # Each vendored file's sha256 as api/server/ui/vendor/README.md gives it: an update that
    # forgot the table (or a file edited by hand) fails here.
    vendor = HERE / "vendor"
    table = (vendor / "README.md").read_text(encoding="utf-8")
    named = re.findall(r"`([\w-]+/[\w.-]+)` \([^()]*?sha256 `([0-9a-f]{64})`\)", table)
    assert {path for path, _ in named} >= {
        "elkjs/elk.bundled.js",
        "uplot/uPlot.iife.min.js",
        "uplot/uPlot.min.css",
        "uplot/LICENSE",
    }
    for path, digest in named:
        assert hashlib.sha256((vendor / path).read_bytes()).hexdigest() == digest, path
    served = {asset.path.removeprefix("vendor/") for asset in ASSETS.values()}
    assert {path for path, _ in named} <= served
