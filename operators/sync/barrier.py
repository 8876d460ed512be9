"""``Barrier``: re-usable barrier synchronisation of the workers, built from a dataflow.

The barrier is a dataflow of its own: an integer-time input, probed. Each round moves this
worker's input one time later; the probe passes that time only once every worker's input has
moved there too, that is, once every worker has arrived at the round. Waiting steps the
worker, so every other dataflow keeps running meanwhile (timely's
``synchronization::Barrier``).
"""

from __future__ import annotations

from operators.input import InputHandle
from operators.probe import ProbeHandle
from operators.runtime import Worker
from operators.scope import Scope


class Barrier:
    """A barrier every worker passes only once all workers have arrived at it.

    Every worker must create its barriers in the same order as its other dataflows (it
    builds one). It can be waited on any number of times; round ``r`` is passed once every
    worker has arrived at round ``r`` (or finished). Closing it (done for you when the
    worker's ``fn`` returns) lets the other workers pass without this one.

    Example::

        >>> from operators import run
        >>> async def work(worker):
        ...     barrier = Barrier(worker)
        ...     for _ in range(3):
        ...         await barrier.wait()
        ...     return barrier.round
        >>> run(work, workers=3)
        [3, 3, 3]
    """

    __slots__ = ("_input", "_probe", "_round", "_worker")

    def __init__(self, worker: Worker) -> None:
        def build(scope: Scope) -> tuple[InputHandle, ProbeHandle]:
            handle, stream = scope.new_input("BarrierInput")
            return handle, stream.probe()

        self._worker = worker
        self._round = 0
        self._input, self._probe = worker.dataflow(build)
        worker.on_finish(self.close)

    @property
    def round(self) -> int:
        """How many rounds this worker has arrived at (calls to :meth:`advance`)."""
        return self._round

    def advance(self) -> None:
        """Arrive at the next round without waiting for the others.

        Raises:
            InputClosed: If the barrier was closed.
        """
        self._input.advance_to(self._round + 1)
        self._round += 1

    def reached(self) -> bool:
        """Whether every worker has arrived at this worker's current round (or finished).

        It only becomes true as the worker steps: the other workers' arrivals are heard
        through the barrier dataflow's progress.
        """
        return not self._probe.less_than(self._round)

    async def wait(self) -> None:
        """Arrive at the next round, then step the worker until every worker has arrived.

        Raises:
            InputClosed: If the barrier was closed.
        """
        self.advance()
        await self._worker.step_while(lambda: not self.reached())

    def close(self) -> None:
        """Leave the barrier for good: the other workers no longer wait for this one.

        Closing twice does nothing.
        """
        self._input.close()

    def __repr__(self) -> str:
        return f"Barrier(worker={self._worker.index}, round={self._round})"
