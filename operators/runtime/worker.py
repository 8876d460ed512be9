"""Workers, and the scopes their dataflows are built in.

A :class:`Worker` holds one copy of every dataflow, run as coroutines on one event loop.
``execute(fn, workers=N)`` runs ``fn(worker)`` once per worker. A worker schedules only the
operators that were activated (records arrived, a frontier they care about moved, or they
asked to run again), and when nothing is active it awaits new activity rather than spinning.
When ``fn`` returns, the worker closes the inputs it still has open and keeps stepping until
its dataflows complete; ``execute`` then returns every worker's result, in worker order.

A :class:`Scope` is the handle a dataflow-building function gets: a scope under
construction. The runtime's scope knows the engine side (reserving operator slots, wiring
edges, nesting scopes); the operator layer registers a subclass that adds the
stream-building methods users call (``new_input``, ``feedback``, ...), so the engine never
imports it. Scope and worker live in one module because each hands out the other: a worker
builds the root scope of each dataflow, and every scope tells which worker builds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable, Hashable, Iterator
from time import perf_counter
from typing import Any, TypeVar

import uvloop

from operators.runtime.fabric import Fabric
from operators.runtime.subgraph import FrontierListener, Subgraph, SubgraphBuilder
from operators.runtime.time_domain import (
    INTEGERS,
    IterativeRefinement,
    Refinement,
    TimeDomain,
)

R = TypeVar("R")

SLICE_SECONDS = 0.005
"""How long one dataflow may run in a step before it lets the others (and the event loop,
with every tenant's requests) run: its scopes stop their rounds once past it."""

STEP_SECONDS = 0.01
"""How long a step may take (several dataflows' slices) before the worker yields."""
S = TypeVar("S", bound="Scope")


class Scope:
    """A scope being built on one worker (the root scope of a dataflow, or a nested one)."""

    def __init__(
        self,
        worker: Worker,
        builder: SubgraphBuilder,
        parent: Scope | None = None,
        index: int = 0,
    ) -> None:
        self.worker = worker
        """The worker building this scope."""
        self.builder = builder
        self.parent = parent
        self.index_in_parent = index
        """This scope's child index in its parent (0 for a dataflow's root)."""

    @property
    def index(self) -> int:
        """The worker's index, ``0 <= index < peers``."""
        return self.worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.worker.peers

    @property
    def minimum(self) -> Hashable:
        """The least time of this scope's time domain."""
        return self.builder.domain.minimum

    @property
    def identity(self) -> Hashable:
        """The identity summary of this scope's time domain."""
        return self.builder.domain.identity

    @property
    def depth(self) -> int:
        """How deeply nested this scope is (0 for a dataflow's root)."""
        return len(self.builder.path) - 1

    def iterative(self: S, name: str = "Iterative") -> S:
        """Open a nested scope whose times are ``Product(outer, inner)``."""
        return self._nest(name, iterative=True)

    def region(self: S, name: str = "Region") -> S:
        """Open a nested scope with this scope's own times (structure only)."""
        return self._nest(name, iterative=False)

    def _nest(self: S, name: str, iterative: bool) -> S:
        parent = self.builder
        index = parent.reserve()
        domain = parent.domain.product() if iterative else parent.domain
        refinement = IterativeRefinement() if iterative else Refinement()
        child = SubgraphBuilder(
            parent.worker,
            (*parent.path, index),
            domain,
            refinement,
            parent.activator(index),
            name=name,
            listener=parent.listener,
        )
        parent.place(index, child)
        return type(self)(self.worker, child, self, index)

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None


_scope_type: type[Scope] = Scope


def register_scope_type(scope_type: type[Scope]) -> None:
    """Make ``worker.dataflow`` hand ``build`` an instance of ``scope_type``.

    The operator layer registers its scope (with the stream-building methods) on import, so
    that the engine below it never imports it.
    """
    global _scope_type
    _scope_type = scope_type


class Worker:
    """One worker: its index among ``peers``, its dataflows, and its scheduling loop."""

    def __init__(self, index: int, peers: int, fabric: Fabric) -> None:
        self.index = index
        self.peers = peers
        self.fabric = fabric
        self._dataflows: dict[int, Subgraph] = {}
        self._active: set[int] = set()
        self._wake = asyncio.Event()
        self._next_channel = 0
        self._next_dataflow = 0
        self._on_finish: list[Callable[[], None]] = []
        self._on_error: dict[int, Callable[[Exception], None]] = {}
        self._channels: dict[int, range] = {}
        """Per dataflow, the channels it allocated (released when it is forgotten)."""
        self.slice_deadline = float("inf")
        """When the dataflow being scheduled must stop and let the others run."""
        self._turn = 0
        """The dataflow index the next step starts after: every busy dataflow gets turns."""

    def allocate_channel(self) -> int:
        """The next channel id; the same sequence on every worker."""
        channel = self._next_channel
        self._next_channel += 1
        return channel

    def dataflow(
        self,
        build: Callable[[Any], R],
        domain: TimeDomain = INTEGERS,
        on_error: Callable[[Exception], None] | None = None,
        on_frontier: FrontierListener | None = None,
    ) -> R:
        """Build a dataflow: call ``build(scope)`` on a new root scope and return its result.

        Every worker must build the same dataflows in the same order. ``domain`` is the root
        scope's time domain: integers by default, or e.g. ``INTEGERS.product()`` for
        ``Product(int, int)`` times. With ``on_error``, an exception raised while the
        dataflow runs drops it from this worker and is passed to ``on_error`` instead of
        ending the worker's step. With ``on_frontier``, ``on_frontier(path, source)`` hears
        each output port whose frontier may have moved, in the scope at ``path`` (the
        dataflow's scopes all hear it).
        """
        index = self._next_dataflow
        self._next_dataflow += 1
        first_channel = self._next_channel
        builder = SubgraphBuilder(
            self,
            (index,),
            domain,
            Refinement(),
            lambda: self._activate(index),
            name=f"Dataflow{index}",
            listener=on_frontier,
        )
        result = build(_scope_type(self, builder))
        subgraph = builder.build()
        subgraph.initialize()
        # Every channel of a dataflow is allocated while it is built (the same range on
        # every worker, as channels are allocated in one sequence).
        self._channels[index] = range(first_channel, self._next_channel)
        self._dataflows[index] = subgraph
        if on_error is not None:
            self._on_error[index] = on_error
        self._activate(index)
        return result

    def on_finish(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when this worker's ``fn`` returns (used to close open inputs)."""
        self._on_finish.append(callback)

    def call_later(self, delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """Run ``callback`` after ``delay`` seconds (an activation for operators that poll)."""
        return asyncio.get_running_loop().call_later(delay, callback)

    @property
    def busy(self) -> bool:
        """Whether some dataflow was activated and waits for this worker's next step."""
        return bool(self._active)

    def _activate(self, dataflow: int) -> None:
        self._active.add(dataflow)
        self._wake.set()

    def step_nowait(self) -> bool:
        """Schedule activated dataflows, each for one slice; return whether any had work.

        Each gets at most :data:`SLICE_SECONDS` (its scopes stop their rounds past it, and
        ask to run again); a step ends once it has taken :data:`STEP_SECONDS`, leaving the
        others active for the next, which starts where this one stopped: a dataflow whose
        loop never goes quiet takes turns with the others, and with the event loop.
        """
        active = self._active
        if not active:
            return False
        if len(active) == 1:  # the usual case: no turns to take
            index = active.pop()
            self.slice_deadline = perf_counter() + SLICE_SECONDS
            self._schedule(index)
            self.slice_deadline = float("inf")
            return True
        order = sorted(active)
        start = next((i for i, index in enumerate(order) if index > self._turn), 0)
        order = order[start:] + order[:start]
        step_deadline = perf_counter() + STEP_SECONDS
        for position, index in enumerate(order):
            if position and perf_counter() > step_deadline:
                break  # the rest stay active: the next step starts with them
            active.discard(index)
            self._turn = index
            self.slice_deadline = perf_counter() + SLICE_SECONDS
            self._schedule(index)
        self.slice_deadline = float("inf")
        return True

    def _schedule(self, index: int) -> None:
        """Schedule one dataflow for its slice; forget it once it is done (or failed)."""
        subgraph = self._dataflows.get(index)
        if subgraph is None:
            return
        handler = self._on_error.get(index)
        if handler is None:
            if not subgraph.schedule():
                self._forget(index)
            return
        try:
            if not subgraph.schedule():
                self._forget(index)
        except Exception as error:
            # This dataflow alone fails: drop it here and let its owner decide (the service
            # drops it on every worker); other dataflows keep running.
            self._forget(index)
            handler(error)

    def _forget(self, index: int) -> None:
        self._dataflows.pop(index, None)
        self._on_error.pop(index, None)
        for channel in self._channels.pop(index, ()):
            self.fabric.release(channel)

    def drop_dataflow(self, index: int) -> bool:
        """Stop running dataflow ``index`` on this worker, wherever it is.

        Every worker must drop it (at the same point in their sequence of dataflow commands,
        which the service's control plane guarantees): the others may still hold
        capabilities in it. Returns whether it was still running here.
        """
        running = index in self._dataflows
        self._forget(index)
        self._active.discard(index)
        return running

    def dataflow_indexes(self) -> list[int]:
        """The indexes of the dataflows still running on this worker."""
        return sorted(self._dataflows)

    async def step(self) -> None:
        """Do one round of work, or wait for some to arrive if there is none.

        After a round it yields to the event loop once, so other workers (and whatever else
        shares the loop) run between rounds. With no dataflows left it returns at once.
        """
        if self.step_nowait():
            if self.fabric.stalled():
                await self.fabric.ready()  # a peer's socket is behind: let it drain
            else:
                await asyncio.sleep(0)
            return
        if not self._dataflows:
            return
        self._wake.clear()
        if not self._active:
            await self._wake.wait()
        self.step_nowait()

    async def step_while(self, predicate: Callable[[], bool]) -> None:
        """Step until ``predicate()`` is false (checked before each step)."""
        while predicate():
            await self.step()

    async def _finish(self) -> None:
        callbacks, self._on_finish = self._on_finish, []
        for callback in callbacks:
            callback()
        while self._dataflows:
            await self.step()


async def execute(
    fn: Callable[[Worker], Awaitable[R]], workers: int = 1, fabric: Fabric | None = None
) -> list[R]:
    """Run ``fn(worker)`` on ``workers`` workers on the running loop; return the results.

    An exception raised by any worker (or by an operator it schedules) ends ``execute`` with
    that exception, after every other worker's task has been cancelled and awaited.
    ``fabric`` replaces the in-process communication (tests use one that delivers progress
    late and interleaved; a cluster's connects processes): ``workers`` of its ``peers`` run
    here, those in ``fabric.local``. If the fabric fails (a peer process is lost),
    ``execute`` ends with its error.
    """
    if fabric is None:
        fabric = Fabric(workers)
    elif len(fabric.local) != workers:
        raise ValueError(f"the fabric connects {len(fabric.local)} workers, not {workers}")
    local = [Worker(i, fabric.peers, fabric) for i in fabric.local]

    async def run_one(worker: Worker) -> R:
        result = await fn(worker)
        await worker._finish()
        return result

    async def run_all() -> list[R]:
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(run_one(w), name=f"worker-{w.index}") for w in local]
        except BaseExceptionGroup as failure:
            # One failing worker cancels the others; report the failure itself, not a group.
            first = failure.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
        return [task.result() for task in tasks]

    failed = fabric.failed()
    if failed is None:
        return await run_all()
    workers_done = asyncio.ensure_future(run_all())
    racing: list[asyncio.Future[Any]] = [workers_done, failed]
    await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    if workers_done.done():
        return workers_done.result()
    workers_done.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await workers_done
    failed.result()  # raises the fabric's error
    raise AssertionError("the fabric's failure completed without an error")


GC_GEN0_THRESHOLD = 50_000
"""Allocations between collections of the youngest generation while :func:`run` runs."""


@contextlib.contextmanager
def collecting_rarely() -> Iterator[None]:
    """Tune the cyclic garbage collector for running dataflows, and restore it afterwards.

    Every batch allocates thousands of short-lived objects (the records an operator makes,
    the lists it sends): at the default gen-0 threshold (700) the collector runs every few
    hundred records and walks them, 10-16% of a keyed pipeline's time. Inside, what existed
    before is frozen out of collections (``gc.freeze``: the program's own data, often large,
    lives on) and the gen-0 threshold is :data:`GC_GEN0_THRESHOLD`, as the server does;
    afterwards the objects are unfrozen and the thresholds restored. A program that manages
    the collector itself (it is disabled, or objects are frozen already) is left alone.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def run(fn: Callable[[Worker], Awaitable[R]], workers: int = 1) -> list[R]:
    """Blocking entry point: run :func:`execute` on a fresh uvloop event loop.

    While it runs, the garbage collector is tuned for dataflows (:func:`collecting_rarely`),
    and restored when it returns.
    """
    with collecting_rarely():
        return uvloop.run(execute(fn, workers))
