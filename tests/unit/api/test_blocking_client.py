"""The blocking client is made from the async one: every call, the same signature."""

from __future__ import annotations

import inspect

from api.client.client import AsyncClient, AsyncSession, Client, Session

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
