"""A producer session of the asyncio client: push, advance, commit, close.

Opened by :meth:`api.client.aio.AsyncClient.session`; every call goes through its client.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol


class Requester(Protocol):
    """What a session needs of its client: one request, its decoded JSON answer."""

    async def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        """Make a request; the decoded answer (or the client's error)."""
        ...


class AsyncSession:
    """A producer session: push batches, advance, commit transactions, close."""

    def __init__(self, client: Requester, input_path: str, session: str, time: Any) -> None:
        self.client = client
        self.id = session
        self.time = time
        self._path = f"{input_path}/sessions/{session}"
        self._seq = itertools.count(1)

    async def push(self, records: list[Any], seq: int | None = None) -> Any:
        """Push ``[time, record]`` pairs (whole or nothing); the ack."""
        number = next(self._seq) if seq is None else seq
        return await self.client.request(
            "POST", f"{self._path}/push", {"seq": number, "records": records}
        )

    async def advance(self, time: Any) -> Any:
        """Advance to ``time``; the ack."""
        ack = await self.client.request("POST", f"{self._path}/advance", {"time": time})
        self.time = ack["session_time"]
        return ack

    async def commit(
        self, transactions: list[str], idempotency_key: str, advance_to: Any = None
    ) -> Any:
        """Commit staged transactions atomically (and advance); the ack."""
        body = {
            "transactions": transactions,
            "idempotency_key": idempotency_key,
            "advance_to": advance_to,
        }
        return await self.client.request("POST", f"{self._path}/commit", body)

    async def close(self) -> Any:
        """Close the session."""
        return await self.client.request("DELETE", self._path)
