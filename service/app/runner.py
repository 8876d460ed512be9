"""Running the service: start, recovery, expiry, fail-stop and stop.

A :class:`Runner` starts what the manager made: it opens the journal (every kept log
checked before anything runs), the placement's fabric and the command plane's workers,
then recovers what the journal kept; all along it expires staged transactions left too
long. When something cannot be masked (a failed sync, a lost process, a bug in the
engine) it stops taking work and says why (:attr:`Runner.fatal`): the process must exit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time as wallclock
from collections.abc import Callable
from typing import Any, TypeVar

from operators.graph import parse_graph
from operators.runtime.cluster import PeerLost
from service.app.dataflow import Dataflow
from service.app.errors import ServiceError, Unavailable
from service.app.inputs import ProducerInput
from service.app.journal import Journal, StoreJournal
from service.app.pace import TICK, LoopLag
from service.app.placement import Placement
from service.app.plugins import load_operator_plugins
from service.app.recovery import Recovery
from service.app.registry import Dataflows
from service.app.settings import Settings
from service.app.shape import settle
from service.app.views import StoreStats
from service.store import StoredDataflow

log = logging.getLogger("frontier.service")

T = TypeVar("T")

SAMPLE_SECONDS = 1.0
"""How often every dataflow's pace is sampled (its throughput and latency charts' step)."""


class Runner:
    """The service's life: what runs, whether it is ready, and why it stopped."""

    def __init__(
        self,
        settings: Settings,
        journal: Journal,
        placement: Placement,
        registry: Dataflows,
    ) -> None:
        self.settings = settings
        self.journal = journal
        self.placement = placement
        self.registry = registry
        self.plane = registry.plane
        self.recovery = Recovery(registry, self.plane, lambda: self.failure)
        self.ready = False
        """Whether what the journal kept is recovered (the service takes requests)."""
        self.recovery_seconds: float | None = None
        self.fatal: asyncio.Event | None = None
        """Set when the data directory failed (a sync, or recovery), or the cluster lost a
        process: this process must stop (and exit non-zero)."""
        self.left: asyncio.Event = asyncio.Event()
        """Set when another process of the cluster stopped on purpose: this one stops too."""
        self.left_by: str | None = None
        """Which process left (``process 1 (host:port)``)."""
        self.stopping = False
        self._failure: BaseException | None = None
        self._background: list[asyncio.Task[None]] = []
        self.loop_lag = LoopLag()
        """How late the event loop runs (stalls included), from :meth:`_pace_loop`."""

    async def start(self) -> None:
        """Load the deployer's operators, open the journal, start the workers, recover."""
        load_operator_plugins(self.settings.operator_modules)
        self.fatal = asyncio.Event()
        stored = self.journal.open()
        # The directory's shape first: one written by another shape or process refuses to
        # start (unless this start rescales), before any log is opened for writing.
        if isinstance(self.journal, StoreJournal):  # without a directory, nothing to check
            stored = self._settle(self.journal, stored)
        # Every log is opened (every frame checked) before anything runs: a corrupt
        # directory refuses to start, naming the file and the offset.
        for dataflow in stored:
            if dataflow.status != "failed":
                inputs = list(self.registry.compile(dataflow.graph).spec.inputs())
                self.journal.open_logs(dataflow.id, inputs)
        await self.placement.open()
        self.plane.start()
        loop = asyncio.get_running_loop()
        watch = self.placement.watch(self)
        if watch is not None:
            self._background.append(watch)
        if stored or self.placement.process != 0:
            self._background.append(loop.create_task(self._recover(stored), name="recovery"))
        else:
            self.ready = True
            self.recovery.issued()
        self._background.append(loop.create_task(self._pace_loop(), name="pace"))
        limits = self.settings.limits
        bounds = (limits.staged_transaction_seconds, limits.session_grace_seconds)
        if any(math.isfinite(bound) and bound > 0 for bound in bounds):
            self._background.append(loop.create_task(self._expire_loop(), name="expiry"))

    def _settle(self, journal: StoreJournal, stored: list[StoredDataflow]) -> list[StoredDataflow]:
        """Check the directory's shape (:func:`~service.app.shape.settle`); its dataflows."""
        settled = settle(journal, self.settings, stored, _inputs_of)
        self.recovery.rescaled = settled.rescaled
        if settled.rescaled:
            log.warning(
                "rescaling: %s was written by a cluster of %s; its %d dataflows are rebuilt "
                "on %d process(es) x %d worker(s), every input kept on its process",
                self.settings.data_dir,
                settled.before,
                len(settled.dataflows),
                self.settings.processes,
                self.settings.workers,
            )
        return settled.dataflows

    async def _recover(self, stored: list[Any]) -> None:
        began = wallclock.perf_counter()
        try:
            await self.recovery.run(stored)
        except Exception as error:
            self._stopped(error, "recovery failed, the service stops: %s")
            return
        self.recovery.issued()
        try:
            # Another process is ready once process 0 has recovered too: a process new to
            # the cluster (a rescale) learns every dataflow, and its consumers, from it.
            await self.recovery.until_zero_recovered()
        except Exception as error:
            self._stopped(error, "recovery failed, the service stops: %s")
            return
        self.recovery_seconds = wallclock.perf_counter() - began
        self.ready = True
        log.info(
            "recovered %d dataflows, %d records replayed in %.3f s",
            len(stored),
            self.recovery.replayed.records,
            self.recovery_seconds,
        )

    # ----------------------------------------------------------------- failures

    def _stopped(self, error: BaseException, message: str, reason: str | None = None) -> None:
        """Fail-stop: nothing can be trusted (or acknowledged) any more."""
        self._failure = error
        log.critical(message, error)
        self.plane.fail_pending(reason or f"the service stopped: {self.failure}")
        if self.fatal is not None:
            self.fatal.set()

    def store_failed(self, error: BaseException) -> None:
        """A sync failed: nothing can be acknowledged any more (fail-stop)."""
        reason = f"the service stopped: the data directory failed: {error}"
        self._stopped(error, "the data directory failed, the service stops: %s", reason)

    def engine_failed(self, error: BaseException) -> None:
        """A worker ended with an exception (a bug in the engine): every request fails."""
        self._failure = error
        self.plane.fail_pending(f"the service stopped: {self.failure}")

    def peer_lost(self, error: PeerLost) -> None:
        """A process of the cluster was lost: nothing computed here can be trusted."""
        self._stopped(
            error,
            "the cluster lost a process, this one stops: %s",
            f"the service stopped: {error}",
        )

    def peer_left(self, who: str) -> None:
        """A process of the cluster left on purpose: the cluster is stopping."""
        self.left_by = who
        log.warning("%s left the cluster: this process stops too", who)
        self.left.set()

    @property
    def failure(self) -> str | None:
        """Why the workers stopped, if an error stopped them (else ``None``)."""
        if self._failure is None:
            return None
        return f"{type(self._failure).__name__}: {self._failure}"

    @property
    def running(self) -> bool:
        """Whether the workers are running."""
        return bool(self.plane.tasks) and not self.stopping and self._failure is None

    def check_ready(self) -> None:
        """:class:`Unavailable` while the service recovers, or once its cluster failed."""
        if isinstance(self._failure, PeerLost):
            raise Unavailable(f"the service stopped: {self._failure}")
        if not self.ready and self._failure is None:
            raise Unavailable("the service is recovering its data directory", retry_after=1)

    def store_stats(self) -> StoreStats | None:
        """What the metrics show of the data directory (``None`` without one)."""
        return self.journal.stats(self.recovery_seconds, self.recovery.replayed.records)

    # ----------------------------------------------------------------- pace

    async def _pace_loop(self, every: float = SAMPLE_SECONDS) -> None:
        """Watch the event loop's lateness, and sample every dataflow each ``every`` seconds.

        A timer set for every :data:`~service.app.pace.TICK` seconds: how late it fires is
        how long the loop ran other things (or nothing: a stall) meanwhile.
        """
        loop = asyncio.get_running_loop()
        sampled = expected = loop.time()
        while True:
            expected += TICK
            await asyncio.sleep(max(0.0, expected - loop.time()))
            now = loop.time()
            self.loop_lag.observe(max(0.0, now - expected), wallclock.time())
            expected = max(expected, now)  # after a stall, the next timer is a tick away
            if now - sampled >= every:
                self.sample_dataflows(wallclock.time(), now - sampled)
                sampled = now

    def sample_dataflows(self, at: float, seconds: float) -> None:
        """Close an interval of ``seconds`` (ending ``at``) of every dataflow's pace."""
        lag = self.loop_lag.take()
        for dataflow in list(self.registry.by_id.values()):
            try:
                dataflow.sample(at, seconds, lag)
            except Exception:  # a bug must not stop sampling for good: said, tried again
                log.exception("sampling dataflow %s failed", dataflow.id)

    # ----------------------------------------------------------------- expiry

    async def _expire_loop(self) -> None:
        """Expire staged transactions, and close sessions whose socket ended, all along.

        A transaction goes once left ``staged_transaction_seconds``, a session once its
        socket ended ``session_grace_seconds`` ago without another resuming it. Looked at
        every twentieth of the shorter bound (between 50 ms and 10 s), so each goes at most
        that late; a commit or a staging request finds a due transaction expired at once.
        """
        limits = self.settings.limits
        bounds = [limits.staged_transaction_seconds, limits.session_grace_seconds]
        interval = min(max(min(b for b in bounds if b > 0) / 20, 0.05), 10.0)
        while True:
            await asyncio.sleep(interval)
            if self.ready and self.running:
                try:
                    await self.expire_transactions()
                    await self.close_abandoned_sessions()
                except Exception:  # a bug must not stop expiry for good: said, tried again
                    log.exception("expiring staged transactions or sessions failed")

    async def close_abandoned_sessions(self, now: float | None = None) -> int:
        """Close every session whose socket ended ``session_grace_seconds`` ago; how many."""
        grace = self.settings.limits.session_grace_seconds
        gone = await self._each_input(lambda producer, at: producer.close_abandoned(at), now)
        for dataflow, producer, session in gone:
            log.info(
                "session %s of input %r of dataflow %s closed: its socket ended %g s ago and "
                "none resumed it (session_grace_seconds)",
                session,
                producer.name,
                dataflow.id,
                grace,
            )
        return len(gone)

    async def expire_transactions(self, now: float | None = None) -> int:
        """Expire every transaction due at ``now`` (default: the wall clock); how many.

        Each expiry is in its input's log (durable before this returns) so that a restart
        does not bring the transaction back.
        """
        seconds = self.settings.limits.staged_transaction_seconds
        gone = await self._each_input(lambda producer, at: producer.expire(at), now)
        for dataflow, producer, (transaction, records) in gone:
            log.info(
                "transaction %r of input %r of dataflow %s expired: %d records discarded "
                "(staged_transaction_seconds %g)",
                transaction,
                producer.name,
                dataflow.id,
                records,
                seconds,
            )
        return len(gone)

    async def _each_input(
        self, action: Callable[[ProducerInput, float], list[T]], now: float | None
    ) -> list[tuple[Dataflow, ProducerInput, T]]:
        """``action(input, now)`` on every input, each durable before the next; what went.

        An input whose log refuses the write (a full disk) is left for the next round.
        """
        now = wallclock.time() if now is None else now
        done: list[tuple[Dataflow, ProducerInput, T]] = []
        for dataflow in list(self.registry.by_id.values()):
            for producer in list(dataflow.inputs.values()):
                try:
                    gone = action(producer, now)
                    if gone:
                        await producer.durable()
                except ServiceError as error:  # a full disk: the next round tries again
                    log.warning("inputs of %s wait: %s", dataflow.id, error)
                    continue
                done.extend((dataflow, producer, item) for item in gone)
        return done

    # ----------------------------------------------------------------- stopping

    async def stop(self) -> None:
        """Stop the workers and what runs beside them; close the fabric and the journal."""
        self.stopping = True
        await self.plane.stop()
        for background in self._background:
            background.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()
        self.plane.fail_pending("the service stopped")
        await self.placement.close(self._failure)
        await self.journal.close()


def _inputs_of(dataflow: Any) -> list[str]:
    """A stored dataflow's inputs, in its graph's order."""
    return parse_graph(dataflow.graph).inputs()
