"""The blocking client is made from the async one: every call, the same signature."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

import pytest

from api.client import AsyncClient, AsyncSession, Client, Session
from api.client.blocking import _Blocking

# Calls whose blocking form differs on purpose: an iterator collected into a list, an
# async session wrapped in a blocking one, streams that only make sense on a loop, and the
# plumbing (request, close) the blocking client drives itself.
DIFFERENT = {"times", "session", "frontiers", "events", "request", "request_bytes", "close"}


def coroutine_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }


def test_every_async_call_has_a_blocking_one_with_the_same_parameters() -> None:
    calls = coroutine_methods(AsyncClient)
    assert len(calls) > 15
    for name, signature in calls.items():
        if name in DIFFERENT:
            continue
        blocking = getattr(Client, name)
        assert blocking.__doc__ == getattr(AsyncClient, name).__doc__, name
        bound = getattr(object.__new__(Client), name)
        assert inspect.signature(bound).parameters == dict(
            list(signature.parameters.items())[1:]
        ), name


def test_every_session_call_has_a_blocking_one_with_the_same_parameters() -> None:
    calls = coroutine_methods(AsyncSession)
    assert set(calls) == {"push", "advance", "commit", "close"}
    for name, signature in calls.items():
        bound = getattr(object.__new__(Session), name)
        assert inspect.signature(bound).parameters == dict(
            list(signature.parameters.items())[1:]
        ), name


def test_the_calls_written_by_hand_keep_their_parameters() -> None:
    def parameters(call: Callable[..., Any]) -> list[inspect.Parameter]:
        return list(inspect.signature(call).parameters.values())

    assert parameters(Client.session) == parameters(AsyncClient.session)
    # The blocking times collects every page; it takes no page size.
    assert parameters(Client.times) == [
        p for p in parameters(AsyncClient.times) if p.name != "page"
    ]
    assert parameters(Client.close) == parameters(AsyncClient.close)


class Reached(Exception):
    """Raised by the stand-in for the wire: the call got as far as a request."""


def test_every_blocking_call_runs_on_the_clients_loop_thread() -> None:
    client = Client("http://frontier.invalid")
    seen: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    async def request(*_args: Any, **_kwargs: Any) -> Any:
        seen.append((asyncio.get_running_loop(), threading.current_thread()))
        raise Reached

    client.aio.request = request  # type: ignore[method-assign]
    client.aio.request_bytes = request  # type: ignore[method-assign]
    session = Session(client, AsyncSession(client.aio, "/v1/dataflows/d/inputs/i", "s", 0))
    made = [name for name, member in vars(Client).items() if isinstance(member, _Blocking)]
    calls: dict[str, Callable[..., Any]] = {name: getattr(client, name) for name in made}
    calls["session"] = client.session
    calls["times"] = lambda dataflow, output: list(client.times(dataflow, output))
    calls.update(
        {f"Session.{name}": getattr(session, name) for name in coroutine_methods(AsyncSession)}
    )
    try:
        assert len(calls) > 20
        for name, call in calls.items():
            parameters = inspect.signature(call).parameters.values()
            required = [p for p in parameters if p.default is p.empty]
            seen.clear()
            with pytest.raises(Reached):
                call(*["x"] * len(required))
            assert seen == [(client._loop, client._thread)], name
            assert client._thread is not threading.current_thread()
    finally:
        client.close()
