"""Liveness and readiness follow the workers: an error in the engine itself fails both."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from operators import Worker
from service.app import Settings

GRAPH = {"nodes": {"i": {"op": "input"}, "o": {"op": "output"}}, "edges": [["i", "o"]]}


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_app(Settings()), host="127.0.0.1")) as c:
        yield c


async def answer(client: TestClient[Any, Any], method: str, path: str, **kw: Any) -> Any:
    response = await client.request(method, path, **kw)
    return response.status, await response.json()


async def test_a_healthy_server(client: TestClient[Any, Any]) -> None:
    assert await answer(client, "GET", "/healthz") == (200, {"status": "ok"})
    assert await answer(client, "GET", "/readyz") == (200, {"status": "ready"})


async def test_an_engine_failure_fails_liveness_readiness_and_waiting_requests(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug in the engine (not in a dataflow's expressions): a worker's next step raises.
    def broken(self: Worker) -> bool:
        raise RuntimeError("the tracker lost a pointstamp")

    monkeypatch.setattr(Worker, "step_nowait", broken)
    # The create wakes the workers, which fail: the request is answered, not left hanging.
    status, problem = await answer(client, "POST", "/v1/dataflows", json={"graph": GRAPH})
    assert (status, problem["detail"]) == (
        410,
        "the service stopped: RuntimeError: the tracker lost a pointstamp",
    )
    assert await answer(client, "GET", "/healthz") == (
        503,
        {"status": "failed", "error": "RuntimeError: the tracker lost a pointstamp"},
    )
    assert await answer(client, "GET", "/readyz") == (503, {"status": "not ready"})
    status, problem = await answer(client, "POST", "/v1/dataflows", json={"graph": GRAPH})
    assert (status, problem["detail"]) == (410, "the service is not running")
