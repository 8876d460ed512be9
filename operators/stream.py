"""Streams: the fluent, typed handle on an operator output within one scope.

:class:`Stream` itself only knows where its records come from (its scope, the output port and
the tee that fans them out), how to close a loop, and how to be probed. Its other methods are
the catalogue's operators. Each is *declared* here, so the type checker and the reader see
every method with its signature and docstring, and *attached* by the module that defines the
operator, as timely's extension traits add methods to its ``Stream``::

    @attach(Stream.map)
    def map_stream(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
        ...

``attach`` installs the function itself as the method (no call in between), and its types
make the type checker hold the function to the declaration. Only the operator modules import
this one, never the reverse, so there is no import cycle. Importing :mod:`operators` (any
public name) imports every operator module (:mod:`operators.catalogue`): until then a
declared method raises :class:`NotImplementedError`, and :func:`unattached` lists it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from operators.probe import ProbeHandle
from operators.progress import MutableAntichain, Source
from operators.runtime import Columns, Scope, Tee

if TYPE_CHECKING:
    import pyarrow as pa

    from operators.capability import Capability
    from operators.capture.pushers import EventPusher
    from operators.core import BinaryLogic, NotifyLogic, OperatorCore, UnaryLogic
    from operators.runtime.routing import ColumnKey

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

_DECLARED: dict[str, Callable[..., Any]] = {}
"""The declared operator methods by name, as declared (before their modules attach them)."""

_UNATTACHED = "the module of this operator is not imported yet: import operators to load them all"


def _declared(method: F) -> F:
    """Declare ``method`` as an operator's method, which the operator's module attaches."""
    _DECLARED[method.__name__] = method
    return method


class LoopEnd(Protocol):
    """What :meth:`Stream.connect_loop` needs of a :class:`~operators.feedback.LoopHandle`."""

    def connect(self, stream: Stream) -> None:
        """Feed ``stream`` into the loop."""
        ...


class Stream:
    """Records at times, leaving one output port of one operator in ``scope``."""

    __slots__ = ("scope", "source", "tee")

    def __init__(self, scope: Scope, source: Source, tee: Tee) -> None:
        self.scope = scope
        self.source = source
        self.tee = tee

    def read_by(self, reader: Callable[[Source, Tee], None]) -> None:
        """Wire a reader of this stream: ``reader(source, tee)`` connects an operator input.

        At once here. A stream of a fused ``map``/``filter``/``flat_map`` chain
        (:class:`~operators.fused.Chained`) calls it once its chain's operator is built, when
        every reader of every stream of the chain is known.
        """
        reader(self.source, self.tee)

    def connect_loop(self, handle: LoopEnd) -> None:
        """Feed this stream into the feedback ``handle`` made by ``scope.feedback``."""
        handle.connect(self)

    def probe(self) -> ProbeHandle:
        """Watch this stream's frontier: which times may still appear on it.

        A probe adds no operator: its scope keeps the handle's frontier equal to the frontier
        at the stream's output port. A time has passed there once the operator producing the
        stream can no longer send at it, which means every record at that time has been
        handled by that operator and everything upstream of it.
        """
        frontier: MutableAntichain[Hashable] = MutableAntichain()
        self.scope.builder.watch(self.source, frontier)
        return ProbeHandle(frontier, self.scope.worker)

    def __repr__(self) -> str:
        return f"Stream({self.source!r})"

    # The catalogue: declared here, attached by each operator's module (see ``attach``).
    # A body only runs while its module is not imported.

    @_declared
    def map(self, fn: Callable[[Any], Any]) -> Stream:
        """Apply ``fn`` to every record."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def map_batches(self, fn: Callable[[list[Any]], list[Any]]) -> Stream:
        """Replace every batch of records by ``fn(batch)`` (one call per batch)."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def evaluate(self, fn: Callable[[list[Any]], list[Any]]) -> Stream:
        """Like :meth:`map_batches` for a function of each record: a slow one is sliced."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def flat_map(self, fn: Callable[[Any], Any]) -> Stream:
        """Replace every record by the records of the iterable ``fn(record)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def filter(self, predicate: Callable[[Any], bool]) -> Stream:
        """Keep the records for which ``predicate`` is true."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def inspect(self, fn: Callable[[Any], object]) -> Stream:
        """Call ``fn(record)`` on every record and pass the stream on unchanged."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def inspect_batch(self, fn: Callable[[Hashable, list[Any]], object]) -> Stream:
        """Call ``fn(time, records)`` on every batch and pass the stream on unchanged."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def exchange(self, key: Callable[[Any], object], columns: ColumnKey | None = None) -> Stream:
        """Send every record to worker ``stable_hash(key(record)) % peers``.

        ``columns``: the same key for batches of columns (field names, or a function of the
        batch), so that they are routed by vectorized kernels and stay columns.
        """
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def concat(self, *others: Stream) -> Stream:
        """This stream's records and those of ``others`` (same scope), as one stream."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def broadcast(self) -> Stream:
        """Every record to every worker."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def partition(self, parts: int, fn: Callable[[Any], tuple[int, Any]]) -> list[Stream]:
        """Split into ``parts`` streams: ``fn(record)`` gives ``(part, value)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def branch(self, predicate: Callable[[Any], bool]) -> tuple[Stream, Stream]:
        """Split by ``predicate``: ``(records where false, records where true)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def ok_err(self, fn: Callable[[Any], Any]) -> tuple[Stream, Stream]:
        """Split by ``fn(record)``, an ``Ok(value)`` or an ``Err(error)``: ``(oks, errs)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def delay(self, fn: Callable[[Any, Hashable], Hashable | None]) -> Stream:
        """Move each record to the later time ``fn(record, time)``, sent once that is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def join(
        self,
        other: Stream,
        key_left: Callable[[Any], Hashable],
        key_right: Callable[[Any], Hashable],
    ) -> Stream:
        """Pairs ``(left, right)`` with equal keys at the same time (an equijoin per time)."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def capture_into(self, pusher: EventPusher) -> None:
        """Record this stream's batches and frontier changes as events into ``pusher``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def enter(self, scope: Scope) -> Stream:
        """Bring this stream into ``scope``, a scope nested directly in this one."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def leave(self) -> Stream:
        """Take this stream out of its nested scope into the parent scope."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def count(self) -> Stream:
        """The number of records at each time, emitted once the time is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def count_by(self, key: Callable[[Any], Hashable] | None = None) -> Stream:
        """``(key, n)`` per key per time, emitted once the time is complete.

        With no ``key``, the records are the keys.
        """
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def accumulate(self, init: Callable[[], Any], fold: Callable[[Any, list[Any]], Any]) -> Stream:
        """Fold each time's batches into one value, emitted once the time is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def aggregate(
        self,
        key: Callable[[Any], Hashable],
        fold: Callable[[Any, Any], Any],
        emit: Callable[[Hashable, Any], Any],
        init: Callable[[], Any] = lambda: None,
    ) -> Stream:
        """Fold records per key per time; emit ``emit(key, acc)`` once the time is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def unary(
        self,
        constructor: Callable[[Capability, OperatorCore], UnaryLogic],
        name: str = "Unary",
        exchange: Callable[[Any], object] | None = None,
    ) -> Stream:
        """A custom operator: ``constructor(capability, info)`` returns ``logic(input, output)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def unary_frontier(
        self,
        constructor: Callable[[Capability, OperatorCore], UnaryLogic],
        name: str = "UnaryFrontier",
        exchange: Callable[[Any], object] | None = None,
    ) -> Stream:
        """Like :meth:`unary`, and also scheduled when the input frontier changes."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def binary_frontier(
        self,
        other: Stream,
        constructor: Callable[[Capability, OperatorCore], BinaryLogic],
        name: str = "BinaryFrontier",
        exchange_left: Callable[[Any], object] | None = None,
        exchange_right: Callable[[Any], object] | None = None,
    ) -> Stream:
        """A custom two-input operator; ``logic(input1, input2, output)``."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def unary_notify(
        self,
        logic: NotifyLogic,
        name: str = "UnaryNotify",
        exchange: Callable[[Any], object] | None = None,
        notify: Iterable[Hashable] = (),
    ) -> Stream:
        """A custom operator with a notificator: ``logic(input, output, notificator)``."""
        raise NotImplementedError(_UNATTACHED)

    # Columnar operators (operators/columnar): records with a schema as Arrow batches,
    # one pyarrow call per batch (see docs/library.md).

    @_declared
    def map_columns(self, fn: Callable[[pa.RecordBatch], pa.RecordBatch]) -> Stream:
        """Replace every batch by ``fn(batch)``, a record batch of a record batch (one call)."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def filter_columns(self, fn: Callable[[pa.RecordBatch], pa.Array | pa.ChunkedArray]) -> Stream:
        """Keep the records where ``fn(batch)``, a boolean array, is true (one call per batch)."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def exchange_columns(
        self,
        keys: str | Sequence[str] | Callable[[Columns], pa.Array],
        row_key: Callable[[Any], object] | None = None,
    ) -> Stream:
        """Send every record to worker ``stable_hash(key) % peers``, batches kept as columns."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def count_columns(self) -> Stream:
        """The number of records per time, summed over workers, once the time is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def count_by_columns(self, keys: str | Sequence[str]) -> Stream:
        """Records ``{key fields..., "count"}`` per key per time, once the time is complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def aggregate_columns(
        self, keys: str | Sequence[str], aggregations: Mapping[str, tuple[str, str]]
    ) -> Stream:
        """Per key per time, ``{keys..., out: fn(column)}`` (sum/min/max/count), once complete."""
        raise NotImplementedError(_UNATTACHED)

    @_declared
    def join_columns(
        self,
        other: Stream,
        left_keys: str | Sequence[str],
        right_keys: str | Sequence[str],
    ) -> Stream:
        """Records ``{"left": l, "right": r}`` with equal key fields at the same time."""
        raise NotImplementedError(_UNATTACHED)


def attach(
    declaration: Callable[Concatenate[Stream, P], R],
) -> Callable[[Callable[Concatenate[Stream, P], R]], Callable[Concatenate[Stream, P], R]]:
    """Install the decorated function as the :class:`Stream` method ``declaration`` declares.

    The function takes the stream first (under any name), then the declared parameters with
    their names, and returns what the method declares. It may take more parameters after
    those, with defaults (an operator's ``name``), but the type checker sees the decorated
    function as the method declares it: code that passes them calls a function of its own.

    Raises:
        TypeError: ``declaration`` is not a declared method of :class:`Stream`, or it was
            attached already.
    """
    name = declaration.__name__
    if _DECLARED.get(name) is not declaration:
        raise TypeError(f"Stream.{name} is not a declared operator method")
    if vars(Stream)[name] is not declaration:
        raise TypeError(f"Stream.{name} is attached already")

    def install(
        function: Callable[Concatenate[Stream, P], R],
    ) -> Callable[Concatenate[Stream, P], R]:
        setattr(Stream, name, function)
        return function

    return install


def unattached() -> list[str]:
    """The declared operator methods that no module has attached yet, by name.

    Empty once :mod:`operators` is loaded (any of its public names).
    """
    return sorted(name for name, method in _DECLARED.items() if vars(Stream)[name] is method)
