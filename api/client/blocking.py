"""The blocking client: every call of the async client, run on a loop thread of its own.

For scripts, the CLI and Spark tasks. :class:`Client` and :class:`Session` are made from
:class:`~api.client.aio.AsyncClient` and :class:`~api.client.session.AsyncSession` by
:func:`blocking`, so each blocking call has the async call's parameters and docstring.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from api.client.aio import AsyncClient
from api.client.session import AsyncSession

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S")


class _Runner(Generic[S]):
    """A blocking face of an async object ``S``: runs its coroutines to completion."""

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the blocking client's loop thread; its result."""
        raise NotImplementedError

    def _target(self) -> S:
        """The async object whose coroutine methods the blocking methods call."""
        raise NotImplementedError


class _Blocking(Generic[S, P, T]):
    """A blocking method made from a coroutine method of the async client (or session).

    Same parameters (typed through ``ParamSpec``), same docstring and signature; the call
    runs the coroutine on the blocking client's loop thread and returns its result. The
    async class ``S`` is part of the type: only a ``_Runner[S]`` can call the method. So the
    blocking client is a runner over the async one, never a second copy of its calls.
    """

    def __init__(self, method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__
        signature = inspect.signature(method)
        self._signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> _Blocking[S, P, T]: ...

    @overload
    def __get__(self, instance: _Runner[S], owner: type[Any]) -> Callable[P, T]: ...

    def __get__(
        self, instance: _Runner[S] | None, owner: type[Any]
    ) -> _Blocking[S, P, T] | Callable[P, T]:
        if instance is None:
            return self
        method = self._method

        @functools.wraps(method)
        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return instance._run(method(instance._target(), *args, **kwargs))

        call.__signature__ = self._signature  # type: ignore[attr-defined]
        return call


def blocking(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> _Blocking[S, P, T]:
    """The blocking form of a coroutine method of ``S`` (see :class:`_Blocking`)."""
    return _Blocking(method)


class Client(_Runner[AsyncClient]):
    """The blocking client: every :class:`AsyncClient` call, run on a private loop thread."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.aio = AsyncClient(url, token, timeout)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _target(self) -> AsyncClient:
        return self.aio

    def close(self) -> None:
        """Close the connections and stop the loop thread."""
        self._run(self.aio.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Run a coroutine of :attr:`aio` on the loop thread without waiting for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def session(self, dataflow: str, input: str, start: Any = None) -> Session:
        """Open a producer session."""
        return Session(self, self._run(self.aio.session(dataflow, input, start)))

    def times(
        self, dataflow: str, output: str, start: Any = None, end: Any = None
    ) -> Iterator[tuple[Any, list[Any]]]:
        """Each completed ``(time, records)`` of an output in ``[start, end)``."""

        async def collect() -> list[tuple[Any, list[Any]]]:
            return [item async for item in self.aio.times(dataflow, output, start, end)]

        return iter(self._run(collect()))

    # Every other call is the async client's, run to completion.
    create_dataflow = blocking(AsyncClient.create_dataflow)
    plan = blocking(AsyncClient.plan)
    dataflows = blocking(AsyncClient.dataflows)
    dataflow = blocking(AsyncClient.dataflow)
    drop = blocking(AsyncClient.drop)
    explain = blocking(AsyncClient.explain)
    stage = blocking(AsyncClient.stage)
    abort = blocking(AsyncClient.abort)
    close_input = blocking(AsyncClient.close_input)
    advance_input = blocking(AsyncClient.advance_input)
    close_session = blocking(AsyncClient.close_session)
    commit = blocking(AsyncClient.commit)
    input = blocking(AsyncClient.input)
    output = blocking(AsyncClient.output)
    stage_arrow = blocking(AsyncClient.stage_arrow)
    push_arrow = blocking(AsyncClient.push_arrow)
    times_arrow_page = blocking(AsyncClient.times_arrow_page)
    times_page = blocking(AsyncClient.times_page)
    time_counts_page = blocking(AsyncClient.time_counts_page)
    output_frontier = blocking(AsyncClient.output_frontier)
    input_frontier = blocking(AsyncClient.input_frontier)
    commit_consumer = blocking(AsyncClient.commit_consumer)
    forget_consumer = blocking(AsyncClient.forget_consumer)


class Session(_Runner[AsyncSession]):
    """The blocking face of :class:`AsyncSession`."""

    def __init__(self, client: Client, session: AsyncSession) -> None:
        self._client = client
        self._session = session
        self.id = session.id

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._client._run(coroutine)

    def _target(self) -> AsyncSession:
        return self._session

    @property
    def time(self) -> Any:
        """The session's time."""
        return self._session.time

    push = blocking(AsyncSession.push)
    advance = blocking(AsyncSession.advance)
    commit = blocking(AsyncSession.commit)
    close = blocking(AsyncSession.close)
