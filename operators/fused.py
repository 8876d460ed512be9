"""Fused chains: consecutive ``map``, ``filter`` and ``flat_map`` run as one operator.

``stream.map(f).filter(p)`` does not build two operators that each make a list of every
batch and pass it through a channel. ``map``, ``filter`` and ``flat_map`` return a
:class:`Chained` stream, and a run of chained streams, each the only reader of the one above
it, is built as one operator (:func:`build_chain`) whose logic per batch is one function: the
user's functions composed as iterators (``list(filter(p, map(f, records)))``), one Python
call per record per stage and one list, with no channel, scheduling or progress accounting
between the stages.

An operator reading a chained stream (``count_by``, ``inspect``, ``exchange``, ...) is wired
to it when its chain is built (:meth:`Stream.read_by`): when the scope is built
(``SubgraphBuilder.before_build``), when every reader of every stream is known, or earlier
if something needs the stream's output port at once (a probe, ``enter``, ``leave``). A
stream read by two ends its chain, and each chained stream reading it starts its own. The
operator has an output port per stage, its *taps*: a reader of a stream inside a chain
built early reads that stream's tap, so every function runs once per record whoever reads
what, and each stream's frontier is its own port's. A tap nobody reads costs nothing (its
records are never listed). A chain nobody reads is built with its scope, and runs.

What is observable of fusion: fewer operators (named after their stages, ``"Map ->
Filter"``), and within a batch the stages interleave record by record (``f`` of the second
record runs after ``p`` of the first), as in a chained pipeline of Flink; each stage still
sees the records in order, at their times. The graph compiler builds its fused nodes with
:func:`build_chain` too, given each node's batch function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from time import perf_counter
from typing import Any, Final

from operators.builder import OperatorBuilder
from operators.core import OperatorCore
from operators.ports import InputPort, OutputPort
from operators.progress import Source
from operators.runtime import Tee
from operators.stream import Stream

MAP: Final = "map"
FILTER: Final = "filter"
FLAT_MAP: Final = "flat_map"
BATCH: Final = "batch"
"""A stage's kinds: a function of each record (``MAP``), a predicate (``FILTER``), an
iterable per record (``FLAT_MAP``), or a function of a whole batch's list (``BATCH``: a
compiled expression's batch form, which must not modify the list it is given)."""

RUN_RECORDS = 16_384
"""Records a chain's operator (or ``map_batches``, ``inspect``, ...) takes in one run before
it lets its readers run.

Batches queued faster than they are read (a producer sends many before the dataflow runs)
would otherwise go through the chain all at once, and every result would wait in memory
until the next operator ran: a run takes batches until it has taken this many (at least one
batch), then asks to run again in its scope's next pass, after its readers. What a batch
makes is read while it is still in the CPU's caches (20% of W1's time, measured)."""

STEP_SECONDS = 0.02
"""How long one run of a sliced operator may evaluate before it lets the others run.

An expression has a step limit per record (``operators.graph.cel``), but a batch of many
records each near it would still hold the event loop (every tenant, ``/healthz``) for their
sum. A run stops once past this, puts the rest of its batch back (still in flight: the
frontier waits for it) and asks to run again after the others."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One step of a chain: its kind (:data:`MAP`, ...), its function, its operator name."""

    kind: str
    fn: Callable[[Any], Any]
    name: str


Segment = Callable[[list[Any]], list[Any]]
"""Stages composed into one function of a batch."""


def _step(stage: Stage) -> Callable[[Iterable[Any]], Iterable[Any]]:
    """The stage as a function of an iterable of records (lazy where the stage allows)."""
    fn = stage.fn
    if stage.kind == MAP:
        return lambda records: map(fn, records)
    if stage.kind == FILTER:
        return lambda records: filter(fn, records)
    if stage.kind == FLAT_MAP:
        return lambda records: chain.from_iterable(map(fn, records))
    if stage.kind == BATCH:
        return lambda records: fn(records if type(records) is list else list(records))
    raise ValueError(f"unknown stage kind {stage.kind!r}")


def compose(stages: list[Stage]) -> Segment:
    """One function of a batch's list that runs ``stages`` in order, making one list.

    >>> double = Stage(MAP, lambda x: x * 2, "Map")
    >>> odd = Stage(FILTER, lambda x: x % 3 == 0, "Filter")
    >>> compose([double, odd])([1, 2, 3, 4, 5, 6])
    [6, 12]
    """
    steps = [_step(stage) for stage in stages]
    if len(steps) == 1 and stages[0].kind == BATCH:
        return stages[0].fn  # already a function of a list: no wrapper
    if len(steps) == 1:
        only = steps[0]
        return lambda records: list(only(records))

    def run(records: list[Any]) -> list[Any]:
        flowing: Iterable[Any] = records
        for step in steps:
            flowing = step(flowing)
        return flowing if type(flowing) is list else list(flowing)

    return run


# --------------------------------------------------------------------------- the operator


def build_chain(
    stream: Stream,
    stages: list[Stage],
    counted: bool = False,
    sliceable: bool = False,
    name: str | None = None,
) -> list[Stream]:
    """One operator running ``stages`` on ``stream``: the stream after each stage (its taps).

    The operator sends on a tap only if something reads it once the dataflow runs, or with
    ``counted`` (every tap is sent to, so each counts the records leaving its stage: the
    graph compiler's nodes report them); the last tap always runs. With ``sliceable``
    (every stage is a function of each record, so the stages of a slice of a batch give that
    slice's part), a slow batch is evaluated in slices and a run stops after
    :data:`STEP_SECONDS`, leaving the rest for its next run. ``name`` is the operator's
    (by default the stages' names joined by ``" -> "``).
    """
    return ChainBuilder(stream).build(stages, counted, sliceable, name)


class ChainBuilder:
    """A chain operator in the making: its index and its input, before its stages are known.

    Made where the chain starts, so that the operator comes before the operators reading
    it in its scope (the order a scope schedules in: data flows forward); built once the
    stages are known.
    """

    __slots__ = ("builder", "input")

    def __init__(self, stream: Stream) -> None:
        self.builder = OperatorBuilder(stream.scope, "Chain")
        self.input = self.builder.new_input(stream)

    def build(
        self,
        stages: list[Stage],
        counted: bool = False,
        sliceable: bool = False,
        name: str | None = None,
    ) -> list[Stream]:
        """Build the operator for ``stages`` (see :func:`build_chain`); its taps' streams."""
        if not stages:
            raise ValueError("a chain needs at least one stage")
        builder = self.builder
        builder.name = builder.core.name = name or " -> ".join(s.name for s in stages)
        outputs: list[OutputPort] = []
        streams: list[Stream] = []
        for _ in stages:
            output, result = builder.new_output()
            outputs.append(output)
            streams.append(result)
        input = self.input

        def constructor() -> Callable[[], None]:
            runner = _Runner(builder.core, input, outputs, stages, counted)
            return runner.sliced if sliceable else runner.whole

        builder.build_reactive(constructor)
        return streams


class _Runner:
    """A chain operator's logic: its segments (stages up to each tap that is sent to)."""

    __slots__ = ("core", "counted", "input", "outputs", "pace", "plan", "stages")

    def __init__(
        self,
        core: OperatorCore,
        input: InputPort,
        outputs: list[OutputPort],
        stages: list[Stage],
        counted: bool,
    ) -> None:
        self.core = core
        self.input = input
        self.outputs = outputs
        self.stages = stages
        self.counted = counted
        self.plan: list[tuple[Segment, OutputPort]] = []
        """Made at the first run, when every reader of every tap is known."""
        self.pace = Pace()

    def _plan(self) -> list[tuple[Segment, OutputPort]]:
        last = len(self.stages) - 1
        plan = []
        start = 0
        for index, output in enumerate(self.outputs):
            if index == last or self.counted or output.tee.pushers:
                plan.append((compose(self.stages[start : index + 1]), output))
                start = index + 1
        self.plan = plan
        return plan

    def whole(self) -> None:
        """Run arrived batches through the chain, up to :data:`RUN_RECORDS` records a run."""
        plan = self.plan or self._plan()
        input = self.input
        left = RUN_RECORDS
        for time, records in input.batches():
            left -= len(records)
            for segment, output in plan:
                records = segment(records)
                if not records:
                    break
                output.forward(time, records)
            if left <= 0 and not input.is_empty():
                self.core.activate()  # the rest after the readers, in the scope's next pass
                return

    def sliced(self) -> None:
        """Run arrived batches in slices that fit the time left; put back what does not."""
        plan = self.plan or self._plan()
        input = self.input
        deadline = perf_counter() + STEP_SECONDS
        left = RUN_RECORDS
        for time, records in input.batches():
            outs, done = _through_slices(plan, records, self.pace, deadline)
            left -= done
            for (_segment, output), out in zip(plan, outs, strict=False):
                output.forward(time, out)
            if done < len(records):
                input.give_back(time, records[done:])  # the rest waits for the next run
                return
            if perf_counter() > deadline and not input.is_empty():
                input.operator.activate_later()
                return
            if left <= 0 and not input.is_empty():
                self.core.activate()  # the rest after the readers, in the scope's next pass
                return


def _through(plan: list[tuple[Segment, OutputPort]], records: list[Any]) -> list[list[Any]]:
    """What each tap of ``plan`` gets of ``records`` (fewer lists once one is empty)."""
    outs = []
    for segment, _output in plan:
        records = segment(records)
        outs.append(records)
        if not records:
            break
    return outs


def _through_slices(
    plan: list[tuple[Segment, OutputPort]], records: list[Any], pace: Pace, deadline: float
) -> tuple[list[list[Any]], int]:
    """Each tap's records for a prefix of ``records``, and how long that prefix is."""
    started = perf_counter()
    if pace.fitting(deadline - started) >= len(records):  # the usual case, without pieces
        whole = _through(plan, records)
        pace.saw(len(records), perf_counter() - started)
        return whole, len(records)
    outs: list[list[Any]] | None = None
    done = 0
    for piece in pieces(records, pace, deadline):
        part = _through(plan, piece)
        if outs is None:
            outs = part
        else:
            for out, more in zip(outs, part, strict=False):
                out.extend(more)
            outs.extend(part[len(outs) :])
        done += len(piece)
    return outs or [], done


class Pace:
    """Records per second an operator's function was last seen to take, to size slices."""

    __slots__ = ("per_second",)

    def __init__(self) -> None:
        self.per_second = 0.0
        """0 until measured: the first batch starts with a slice of one record."""

    def saw(self, records: int, seconds: float) -> None:
        """Record that ``records`` took ``seconds``."""
        self.per_second = records / max(seconds, 1e-7)

    def fitting(self, seconds: float) -> int:
        """How many records fit in a quarter of ``seconds`` (the time left)."""
        return int(self.per_second * max(seconds, 0.0) / 4)


def pieces(records: list[Any], pace: Pace, deadline: float) -> Iterator[list[Any]]:
    """Slices of ``records`` to evaluate, from the first, each timed until the next is asked.

    When the pace says the whole batch fits in a quarter of the time left, it is one piece
    (the usual case: the list itself, no copy). Otherwise slices grow from what fits (at
    least one record), doubling while the deadline is not passed: a run takes at most about
    three times the time left plus one record's worst (which the step limit bounds).
    """
    count = len(records)
    started = perf_counter()
    fits = pace.fitting(deadline - started)
    if fits >= count:
        yield records
        pace.saw(count, perf_counter() - started)
        return
    size = max(1, fits)
    done = 0
    while done < count:
        piece = records[done : done + size]
        began = perf_counter()
        yield piece
        ended = perf_counter()
        pace.saw(len(piece), ended - began)
        done += len(piece)
        if ended > deadline:
            return
        size *= 2


# --------------------------------------------------------------------------- lazy streams


Reader = Callable[[Source, Tee], None]
"""What wires an operator's input to a stream (see :meth:`Stream.read_by`)."""


class Chained(Stream):
    """The stream of a ``map``, ``filter`` or ``flat_map``, built as part of a chain.

    A chain is a run of these streams, each the only reader of the one above it: built as
    one operator (:class:`ChainBuilder`, reserved by the first of the run when it is made, so
    it comes before its readers in the scope). Operators reading a chained stream are wired
    to it when its chain is built (:meth:`read_by`): when its scope is built, or earlier if
    something needs its ``source`` or ``tee`` at once (a probe, ``enter``, ``leave``). A
    stream read by two (two operators, or an operator and a chained stream, ...) ends its
    chain: each chained stream reading it starts a chain of its own.
    """

    __slots__ = ("_built", "_chain", "_extensions", "_parent", "_readers", "_stage")

    def __init__(self, parent: Stream, stage: Stage) -> None:
        # Not Stream.__init__: ``source`` and ``tee`` are properties here, known once built.
        self.scope = parent.scope
        self._parent: Stream | None = parent
        self._stage = stage
        self._built: tuple[Source, Tee] | None = None
        self._readers: list[Reader] = []
        """Inputs to wire to this stream once it is built."""
        self._extensions: list[Chained] = []
        """The chained stream reading this one, while it is the only reader (then fused)."""
        self._chain: ChainBuilder | None = None
        """The operator this stream's chain starts, if it starts one."""
        if isinstance(parent, Chained) and parent._built is None:
            if parent._readers or parent._extensions:
                parent._alone()  # parent has another reader: it ends its chain
                self._chain = ChainBuilder(parent)
            else:
                parent._extensions.append(self)
        else:
            self._chain = ChainBuilder(parent)
        self.scope.builder.before_build(self._finish)

    # Read-only here: a chained stream's port is its chain's (Stream's are plain attributes).
    @property
    def source(self) -> Source:  # type: ignore[override]
        """The output port of the stream's stage, in the chain's operator (built now)."""
        return self._build()[0]

    @property
    def tee(self) -> Tee:  # type: ignore[override]
        """Where readers of the stream attach (the chain's operator is built now)."""
        return self._build()[1]

    @property
    def built(self) -> bool:
        """Whether its operator exists (it was needed, or its scope was built)."""
        return self._built is not None

    def read_by(self, reader: Reader) -> None:
        """Wire ``reader`` to this stream once its chain is built (at once if it is)."""
        if self._built is not None:
            reader(*self._built)
            return
        self._alone()
        self._readers.append(reader)

    def _finish(self) -> None:
        """When the scope is built: a chain nobody needed is built all the same (it runs)."""
        self._build()

    def _alone(self) -> None:
        """This stream gets another reader: a chained stream reading it starts its own chain."""
        extensions, self._extensions = self._extensions, []
        for extension in extensions:
            extension._chain = ChainBuilder(self)  # which reads this stream (read_by)

    def _build(self) -> tuple[Source, Tee]:
        """Build this stream's chain (if not built yet): it and the streams above it it fuses."""
        if self._built is not None:
            return self._built
        run: list[Chained] = [self]
        while run[-1]._chain is None:
            above = run[-1]._parent
            assert isinstance(above, Chained)  # one that starts no chain is fused with its parent
            run.append(above)
        run.reverse()
        chain = run[0]._chain
        assert chain is not None  # the loop above ends at the stream that starts the chain
        taps = chain.build([link._stage for link in run])
        for link, tap in zip(run, taps, strict=True):
            link._built = built = (tap.source, tap.tee)
            link._parent = link._chain = None  # built: what made it is no longer needed
            if link is not self:
                link._extensions = []  # the next of the run, built with it
            readers, link._readers = link._readers, []
            for reader in readers:
                reader(*built)
        # Needed early (a probe), it may have chained readers still unbuilt: their own chains.
        self._alone()
        return self._built  # type: ignore[return-value]  # set in the loop above

    def __repr__(self) -> str:
        state = repr(self._built[0]) if self._built is not None else "not built"
        return f"Chained({self._stage.name}, {state})"


def chained(stream: Stream, stage: Stage) -> Stream:
    """The stream of ``stage`` applied to ``stream``, fused with the chain ``stream`` ends."""
    return Chained(stream, stage)


__all__ = [
    "BATCH",
    "FILTER",
    "FLAT_MAP",
    "MAP",
    "STEP_SECONDS",
    "ChainBuilder",
    "Chained",
    "Pace",
    "Stage",
    "build_chain",
    "chained",
    "compose",
    "pieces",
]
