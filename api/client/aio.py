"""The asyncio client of the HTTP and WebSocket API (``docs/api.md``).

:class:`AsyncClient` makes every call; :class:`~api.client.session.AsyncSession` is a
producer session it opens.
Errors come back as :class:`~api.client.errors.FrontierError` carrying the server's problem
document. Times are given and returned in their JSON form: integers, or ``[outer, inner]``
arrays.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from api.client.errors import FrontierConnectionError, FrontierError
from api.client.session import AsyncSession

ARROW_STREAM = "application/vnd.apache.arrow.stream"


@dataclass(frozen=True, slots=True)
class ArrowPage:
    """One page of completed times as an Arrow IPC stream, with the output's frontier."""

    body: bytes
    frontier: list[Any]
    next_cursor: str | None


class AsyncClient:
    """Talks to one Frontier server. Use as ``async with AsyncClient(url) as client``."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=self._timeout,
                json_serialize=lambda v: orjson.dumps(v).decode(),
            )
        return self._session

    async def close(self) -> None:
        """Close the connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        """One request; the decoded JSON answer (``None`` for 204), or :class:`FrontierError`."""
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        status, raw, _ = await self._exchange(method, path, data, params, headers)
        return None if status == 204 or not raw else orjson.loads(raw)

    async def _exchange(
        self,
        method: str,
        path: str,
        data: bytes | None,
        params: dict[str, str] | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes, dict[str, str]]:
        """Send; the status, body and headers of an answer below 400.

        :class:`FrontierError` for a refusal, :class:`FrontierConnectionError` when no answer
        came (the server is not there, or the connection broke).
        """
        url = self.url + path
        try:
            async with self._http().request(
                method, url, data=data, params=params, headers=headers
            ) as response:
                raw = await response.read()
                status = response.status
                answer_headers = {k.lower(): v for k, v in response.headers.items()}
        except (TimeoutError, aiohttp.ClientConnectionError) as error:
            why = str(error) or type(error).__name__
            raise FrontierConnectionError(f"{method} {url}: no answer: {why}") from error
        if status >= 400:
            try:
                problem = orjson.loads(raw)
            except orjson.JSONDecodeError:
                problem = {"detail": raw.decode(errors="replace")}
            raise FrontierError(status, problem)
        return status, raw, answer_headers

    # ----------------------------------------------------------------- dataflows

    async def create_dataflow(self, graph: dict[str, Any], name: str | None = None) -> Any:
        """Submit a graph; the created dataflow."""
        return await self.request("POST", "/v1/dataflows", {"name": name, "graph": graph})

    async def plan(self, graph: dict[str, Any]) -> Any:
        """Validate a graph without creating it; its compiled plan."""
        answer = await self.request(
            "POST", "/v1/dataflows", {"graph": graph}, params={"dry_run": "true"}
        )
        return answer["plan"]

    async def dataflows(self, page: int = 100, name: str | None = None) -> list[Any]:
        """Every dataflow of this tenant (following pagination).

        With ``name``, only the dataflows of that name (exactly).
        """
        items: list[Any] = []
        first = {"limit": str(page)} if name is None else {"limit": str(page), "name": name}
        params = first
        while True:
            answer = await self.request("GET", "/v1/dataflows", params=params)
            items.extend(answer["items"])
            if answer["next_cursor"] is None:
                return items
            params = {**first, "cursor": answer["next_cursor"]}

    async def dataflow(self, dataflow: str, operators: bool = True) -> Any:
        """One dataflow in full."""
        return await self.request(
            "GET", f"/v1/dataflows/{dataflow}", params={"operators": str(operators).lower()}
        )

    async def explain(self, dataflow: str, location: str, time: Any) -> Any:
        """Why ``time`` is not complete at ``location`` (``node:port`` or an output's name).

        ``{"dataflow", "location", "time", "complete", "frontier", "holders"}``: every
        pointstamp holding the time back there, each with what is behind it.
        """
        params = {"location": location, "time": orjson.dumps(time).decode()}
        return await self.request("GET", f"/v1/dataflows/{dataflow}/explain", params=params)

    async def drop(self, dataflow: str) -> None:
        """Drop a dataflow."""
        await self.request("DELETE", f"/v1/dataflows/{dataflow}")

    # ----------------------------------------------------------------- producing

    async def session(self, dataflow: str, input: str, start: Any = None) -> AsyncSession:
        """Open a producer session on an input."""
        path = f"/v1/dataflows/{dataflow}/inputs/{input}"
        answer = await self.request("POST", f"{path}/sessions", {"start": start})
        return AsyncSession(self, path, answer["session"], answer["time"])

    async def stage(self, dataflow: str, input: str, transaction: str, records: list[Any]) -> int:
        """Stage ``[time, record]`` pairs in a transaction; its size."""
        answer = await self.request(
            "PUT",
            f"/v1/dataflows/{dataflow}/inputs/{input}/transactions/{transaction}",
            {"records": records},
        )
        return int(answer["staged"])

    async def abort(self, dataflow: str, input: str, transaction: str) -> int:
        """Discard a transaction; how many records it had."""
        answer = await self.request(
            "DELETE", f"/v1/dataflows/{dataflow}/inputs/{input}/transactions/{transaction}"
        )
        return int(answer["discarded"])

    async def advance_input(self, dataflow: str, input: str, time: Any) -> Any:
        """Advance an input to ``time`` without a session; the ack, with its frontier.

        Open sessions still hold the input at their own times.
        """
        body = {"transactions": [], "idempotency_key": uuid.uuid4().hex, "advance_to": time}
        return await self.request("POST", f"/v1/dataflows/{dataflow}/inputs/{input}/commit", body)

    async def close_session(self, dataflow: str, input: str, session: str) -> Any:
        """Close a session by its id (one this client did not open, say); the ack."""
        return await self.request(
            "DELETE", f"/v1/dataflows/{dataflow}/inputs/{input}/sessions/{session}"
        )

    async def close_input(self, dataflow: str, input: str) -> list[Any]:
        """Close an input (every session); its frontier now (empty)."""
        answer = await self.request("POST", f"/v1/dataflows/{dataflow}/inputs/{input}/close")
        return list(answer["input_frontier"])

    async def commit(
        self,
        dataflow: str,
        input: str,
        transactions: list[str],
        idempotency_key: str,
        advance_to: Any = None,
        discard: list[str] | None = None,
        digest: str | None = None,
        dropped: int = 0,
    ) -> Any:
        """Commit staged transactions without a session, at the input's time; the ack.

        ``advance_to`` moves the input there (when no session holds it back); with no
        transactions the commit only advances. The same key again answers the same ack.
        ``discard`` names transactions to abort once the commit is done (leftovers).
        ``digest`` is what the write staged (under a key used before, an equal digest is
        answered with the first ack, another is 409 ``idempotency-key-reused``); ``dropped``
        the rows it dropped as late (counted by the input).
        """
        body: dict[str, Any] = {
            "transactions": transactions,
            "idempotency_key": idempotency_key,
            "advance_to": advance_to,
        }
        if discard:
            body["discard"] = discard
        if digest is not None:
            body["digest"] = digest
        if dropped:
            body["dropped"] = dropped
        return await self.request("POST", f"/v1/dataflows/{dataflow}/inputs/{input}/commit", body)

    async def input(self, dataflow: str, input: str) -> Any:
        """An input: frontier, open sessions, open transactions and their staged records."""
        return await self.request("GET", f"/v1/dataflows/{dataflow}/inputs/{input}")

    async def output(self, dataflow: str, output: str) -> Any:
        """An output: frontier, counts, readers (and its ``schema`` if it is typed)."""
        return await self.request("GET", f"/v1/dataflows/{dataflow}/outputs/{output}")

    # ----------------------------------------------------------------- consuming

    async def times(
        self, dataflow: str, output: str, start: Any = None, end: Any = None, page: int = 100
    ) -> AsyncIterator[tuple[Any, list[Any]]]:
        """Each completed ``(time, records)`` of an output in ``[start, end)``."""
        params = {"limit": str(page)}
        if start is not None:
            params["from"] = orjson.dumps(start).decode()
        if end is not None:
            params["to"] = orjson.dumps(end).decode()
        path = f"/v1/dataflows/{dataflow}/outputs/{output}/times"
        while True:
            answer = await self.request("GET", path, params=params)
            for entry in answer["times"]:
                yield entry["time"], entry["records"]
            if answer["next_cursor"] is None:
                return
            params["cursor"] = answer["next_cursor"]

    async def _stream(self, path: str, params: dict[str, str]) -> AsyncIterator[Any]:
        """The events of a WebSocket subscription, until its ``closed`` event.

        A refused upgrade is :class:`FrontierError` (with the problem the same request
        answers without the upgrade, when it answers one); no answer is
        :class:`FrontierConnectionError`.
        """
        url = self.url + path
        try:
            socket = await self._http().ws_connect(url, params=params)
        except aiohttp.WSServerHandshakeError as refused:
            await self.request("GET", path, params=params)  # the refusal's problem, if any
            raise FrontierError(
                refused.status, {"title": refused.message, "detail": f"GET {url}: refused"}
            ) from refused
        except (TimeoutError, aiohttp.ClientConnectionError) as error:
            why = str(error) or type(error).__name__
            raise FrontierConnectionError(f"GET {url}: no answer: {why}") from error
        async with socket as ws:
            async for message in ws:
                if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    event = orjson.loads(message.data)
                    yield event
                    if event.get("type") == "closed":
                        return

    def frontiers(self, dataflow: str, operators: bool = False) -> AsyncIterator[Any]:
        """Frontier events of a dataflow, as they happen."""
        return self._stream(
            f"/v1/dataflows/{dataflow}/frontiers", {"operators": str(operators).lower()}
        )

    def stats(self, dataflow: str, interval: float = 1.0) -> AsyncIterator[Any]:
        """A dataflow's stats every ``interval`` seconds: counts now, and its pace's samples.

        The first message carries every sample kept (the last minutes); each later one the
        samples taken since (``docs/api.md``, "Stats").
        """
        return self._stream(f"/v1/dataflows/{dataflow}/stats", {"interval": f"{interval:g}"})

    def events(
        self, dataflow: str, output: str, start: Any = None, *, frontier: list[Any] | None = None
    ) -> AsyncIterator[Any]:
        """An output's capture events, as they happen.

        From ``start`` (a time) or ``frontier`` (e.g. the ``resume`` of a closed
        subscription) if given: only retained records at those times or later are replayed.
        """
        params = {} if start is None else {"from": orjson.dumps(start).decode()}
        if frontier is not None:
            params["frontier"] = orjson.dumps(frontier).decode()
        return self._stream(f"/v1/dataflows/{dataflow}/outputs/{output}/events", params)

    # ----------------------------------------------------------------- Arrow bodies, consumers

    async def request_bytes(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        content_type: str | None = None,
        params: dict[str, str] | None = None,
        accept: str | None = None,
    ) -> tuple[bytes, dict[str, str]]:
        """A request with a raw body; the raw answer and its headers (names lower-cased).

        A refusal raises :class:`FrontierError`.
        """
        headers: dict[str, str] = {}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        _, raw, answer_headers = await self._exchange(method, path, data, params, headers)
        return raw, answer_headers

    async def stage_arrow(self, dataflow: str, input: str, transaction: str, body: bytes) -> int:
        """Stage an Arrow IPC stream body (``time`` and record columns); the transaction's size."""
        raw, _ = await self.request_bytes(
            "PUT",
            f"/v1/dataflows/{dataflow}/inputs/{input}/transactions/{transaction}",
            body,
            ARROW_STREAM,
        )
        return int(orjson.loads(raw)["staged"])

    async def push_arrow(
        self, dataflow: str, input: str, session: str, seq: int, body: bytes
    ) -> Any:
        """Push an Arrow IPC stream body in a session (whole or nothing); the ack."""
        raw, _ = await self.request_bytes(
            "POST",
            f"/v1/dataflows/{dataflow}/inputs/{input}/sessions/{session}/push",
            body,
            ARROW_STREAM,
            params={"seq": str(seq)},
        )
        return orjson.loads(raw)

    async def times_arrow_page(
        self,
        dataflow: str,
        output: str,
        start: Any = None,
        end: Any = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ArrowPage:
        """One page (up to ``limit`` completed times in ``[start, end)``) as an Arrow stream."""
        params = _page_params(start, end, limit, cursor)
        raw, headers = await self.request_bytes(
            "GET",
            f"/v1/dataflows/{dataflow}/outputs/{output}/times",
            params=params,
            accept=ARROW_STREAM,
        )
        frontier = orjson.loads(headers.get("x-frontier", "[]"))
        return ArrowPage(raw, frontier, headers.get("x-next-cursor"))

    async def times_arrow(
        self, dataflow: str, output: str, start: Any = None, end: Any = None, page: int = 100
    ) -> AsyncIterator[bytes]:
        """Arrow IPC streams of the completed times.

        ``time`` (int64) and ``record`` (JSON text); for a typed output, ``time`` and the
        records' fields as typed columns.
        """
        cursor: str | None = None
        while True:
            answer = await self.times_arrow_page(dataflow, output, start, end, page, cursor)
            yield answer.body
            if answer.next_cursor is None:
                return
            cursor = answer.next_cursor

    async def times_page(
        self,
        dataflow: str,
        output: str,
        start: Any = None,
        end: Any = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Any:
        """One JSON page: ``{"times": [{"time", "records"}], "frontier", "next_cursor"}``."""
        params = _page_params(start, end, limit, cursor)
        return await self.request(
            "GET", f"/v1/dataflows/{dataflow}/outputs/{output}/times", params=params
        )

    async def time_counts_page(
        self,
        dataflow: str,
        output: str,
        start: Any = None,
        end: Any = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> Any:
        """One page of counts: ``{"times": [{"time", "count"}], "frontier", "next_cursor"}``."""
        params = {"limit": str(limit), "counts": "true"}
        if start is not None:
            params["from"] = orjson.dumps(start).decode()
        if end is not None:
            params["to"] = orjson.dumps(end).decode()
        if cursor is not None:
            params["cursor"] = cursor
        return await self.request(
            "GET", f"/v1/dataflows/{dataflow}/outputs/{output}/times", params=params
        )

    async def output_frontier(self, dataflow: str, output: str) -> list[Any]:
        """An output's frontier now (``[]`` once it is complete)."""
        described = await self.dataflow(dataflow, operators=False)
        outputs = described["outputs"]
        if output not in outputs:
            raise FrontierError(404, {"detail": f"dataflow {dataflow!r} has no output {output!r}"})
        return list(outputs[output]["frontier"])

    async def input_frontier(self, dataflow: str, input: str) -> list[Any]:
        """An input's frontier now (``[]`` once it is closed)."""
        described = await self.dataflow(dataflow, operators=False)
        inputs = described["inputs"]
        if input not in inputs:
            raise FrontierError(404, {"detail": f"dataflow {dataflow!r} has no input {input!r}"})
        return list(inputs[input]["frontier"])

    async def commit_consumer(
        self, dataflow: str, output: str, consumer: str, committed: Any
    ) -> Any:
        """Register a consumer of an output as having read every time before ``committed``."""
        return await self.request(
            "PUT",
            f"/v1/dataflows/{dataflow}/outputs/{output}/consumers/{consumer}",
            {"committed": committed},
        )

    async def forget_consumer(self, dataflow: str, output: str, consumer: str) -> None:
        """Unregister a consumer of an output."""
        await self.request(
            "DELETE", f"/v1/dataflows/{dataflow}/outputs/{output}/consumers/{consumer}"
        )


def _page_params(start: Any, end: Any, limit: int, cursor: str | None) -> dict[str, str]:
    """The query of a page of completed times in ``[start, end)``."""
    params = {"limit": str(limit)}
    if start is not None:
        params["from"] = orjson.dumps(start).decode()
    if end is not None:
        params["to"] = orjson.dumps(end).decode()
    if cursor is not None:
        params["cursor"] = cursor
    return params
