"""What the client raises: a refusal with the server's problem document, or no answer."""

from __future__ import annotations

from typing import Any

import aiohttp

PROBLEMS = "https://frontier.dev/problems/"
"""The prefix of every problem ``type`` the server answers (``PROBLEMS + slug``)."""

IDEMPOTENCY_KEY_REUSED = PROBLEMS + "idempotency-key-reused"
"""A commit's idempotency key was used before for other rows (the problem's ``digest`` is the
first commit's) or, without digests, other transactions (409): that commit was applied, this
one was not."""


class FrontierError(Exception):
    """The server refused a request; ``problem`` is its problem+json document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("title") or "error"
        super().__init__(f"{status}: {detail}")

    @property
    def type(self) -> str | None:
        """The problem's ``type`` URI (``None`` if the answer was not a problem document)."""
        kind = self.problem.get("type")
        return kind if isinstance(kind, str) else None


class FrontierConnectionError(aiohttp.ClientConnectionError, ConnectionError):
    """The server could not be reached, or the connection broke before it answered.

    Whether the request was applied is unknown: retry it as it is (a push with the same
    ``seq``, a commit with the same key), which applies it once. It is a ``ConnectionError``,
    and still the ``aiohttp.ClientConnectionError`` callers caught before it existed.
    """
