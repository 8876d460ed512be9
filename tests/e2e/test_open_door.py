"""No open door, and the edges (issue 22): real server processes and the real CLI.

A server listening beyond loopback with no token refuses to start unless anonymous access is
allowed explicitly (then warned about at every start); a body needs its Content-Type; a
server without tokens answers only requests that name it as their Host (no DNS rebinding).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

import api.cli.serving
from api.cli import main
from service.app import Settings
from tests.e2e.conftest import REPO, Server, running

GRAPH = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
REFUSAL = (
    "listening on 0.0.0.0 with no token would give anyone who reaches it full access (create, "
    "push, drop): give tokens (--token TOKEN=TENANT, $FRONTIER_TOKENS, or tokens: in --config), "
    "or allow anonymous access explicitly (--allow-anonymous)"
)


def test_a_server_beyond_loopback_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "api", "serve", "--host", "0.0.0.0", "--port", "0"]
    command += ["--data-dir", str(tmp_path / "data")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"error: {REFUSAL} (see python -m api serve --help)" in done.stderr.decode()
    assert not (tmp_path / "data").exists()


def test_anonymous_access_allowed_explicitly_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    started: list[Settings] = []
    monkeypatch.setattr(api.cli.serving, "_serve", lambda settings, *_: started.append(settings))
    monkeypatch.setattr(api.cli.serving, "asyncio_run", lambda coroutine: coroutine)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    monkeypatch.delenv("FRONTIER_TOKENS", raising=False)
    args = ["serve", "--host", "0.0.0.0", "--port", "9", "--allow-anonymous"]
    with caplog.at_level(logging.WARNING, logger="frontier.server"):
        main.main(args=args, prog_name="frontier", standalone_mode=False)
    assert [(s.host, s.tokens, s.allow_anonymous) for s in started] == [("0.0.0.0", {}, True)]
    assert [r.getMessage() for r in caplog.records] == [
        "anonymous access: 0.0.0.0:9 has no tokens, so anyone who reaches it can create, push "
        "and drop dataflows (allow_anonymous)"
    ]


@pytest.fixture
def tokenless(tmp_path: Path) -> Any:
    with running(tmp_path, config={"allowed_hosts": ["frontier.internal"]}) as server:
        yield server


async def test_a_body_needs_its_content_type(tokenless: Server) -> None:
    async with aiohttp.ClientSession(skip_auto_headers=["Content-Type"]) as http:
        body = orjson.dumps({"graph": GRAPH})
        async with http.post(f"{tokenless.url}/v1/dataflows", data=body) as response:
            assert response.status == 415
            assert response.content_type == "application/problem+json"
            problem = await response.json(content_type=None)
        async with http.get(f"{tokenless.url}/v1/dataflows") as listed:
            dataflows = (await listed.json())["items"]
    assert problem["detail"] == (
        "a POST body needs its Content-Type (application/json, or "
        "application/vnd.apache.arrow.stream where Arrow is taken): a page of another site can "
        "send one without, unasked"
    )
    assert dataflows == []


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1", 200),
        ("localhost", 200),
        ("[::1]", 200),
        ("10.1.2.3", 200),  # an address: no name was pointed at the server
        ("frontier.internal", 200),  # allowed_hosts
        ("attacker.example", 403),
        ("127.0.0.1.nip.io", 403),
    ],
)
async def test_a_server_without_tokens_answers_only_its_own_host(
    tokenless: Server, host: str, status: int
) -> None:
    headers = {"Host": f"{host}:{tokenless.port}"}
    url = f"{tokenless.url}/v1/dataflows"
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        assert response.status == status
        answer = await response.json(content_type=None)
    if status == 403:
        name = host
        assert answer["detail"] == (
            f"Host {name!r} is not this server's: without tokens, a server answers only its "
            "own address, localhost and the names in allowed_hosts (a name of another site "
            "pointed at it is DNS rebinding)"
        )


async def test_a_websocket_to_a_rebound_name_is_refused(tokenless: Server) -> None:
    url = f"{tokenless.url}/v1/dataflows"
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json={"graph": GRAPH}) as created,
    ):
        dataflow = (await created.json())["id"]
    rebound = f"ws://attacker.example:{tokenless.port}/v1/dataflows/{dataflow}/frontiers"
    with pytest.raises(InvalidStatus) as refused:
        # Connected to the server's address, naming another host (as a rebound name does).
        async with connect(rebound, host="127.0.0.1", port=tokenless.port, open_timeout=10):
            pass
    assert refused.value.response.status_code == 403
