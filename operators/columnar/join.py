"""``join_columns``: the row ``join``'s equijoin per time, on columns.

The same semantics as :mod:`operators.join`: both inputs are exchanged by their keys (as
columns, hashed as the rows' keys would be), so matching records meet on one worker; a
batch arriving on one side is matched at once against what the other side has delivered at
the same time, its pairs sent at the batch's time, and then kept for the other side's later
batches; a side's records at a time are forgotten once the *other* input's frontier has
passed it. A pair is one record ``{"left": left record, "right": right record}``.

Matching is vectorized: the key columns of both sides are dictionary-encoded together
(a null is a value, and equals a null, as ``None == None`` in the row join), several key
columns combined into one code, and the codes joined with pyarrow's hash join, which gives
the row numbers of the pairs; the pairs are taken from the two sides' records.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from operators.builder import OperatorBuilder
from operators.columnar.batches import key_names
from operators.ports import InputPort, OutputPort
from operators.progress import MutableAntichain
from operators.runtime import Batch, Columns, Interest
from operators.runtime.arrow import use_engine_pool
from operators.runtime.routing import field_key
from operators.stream import Stream, attach

if TYPE_CHECKING:
    import pyarrow as pa


class _Side:
    """One side's records at one time: the arrived arrays, concatenated when needed."""

    __slots__ = ("_chunks", "_whole")

    def __init__(self) -> None:
        self._chunks: list[pa.Array] = []
        self._whole: pa.Array | None = None

    def add(self, array: pa.Array) -> None:
        self._chunks.append(array)
        self._whole = None

    def records(self) -> pa.Array:
        import pyarrow as pa

        if self._whole is None:
            self._whole = pa.concat_arrays(self._chunks)
            self._chunks = [self._whole]
        return self._whole


_Stash = dict[Hashable, _Side]


def join_columns(
    left: Stream,
    other: Stream,
    left_keys: str | Sequence[str],
    right_keys: str | Sequence[str],
    name: str = "JoinColumns",
) -> Stream:
    """Pairs ``{"left": l, "right": r}`` whose key fields are equal, at the same time.

    ``left_keys`` and ``right_keys`` name as many fields of each side's records (of the
    same types, or types the right side's cast to exactly). Pairs are sent as soon as both
    records have arrived, not when the time completes, as the row ``join`` sends them.
    """
    mine, theirs = key_names(left_keys, name), key_names(right_keys, name)
    if len(mine) != len(theirs):
        raise ValueError(f"{name}: {len(mine)} left key fields but {len(theirs)} right ones")
    use_engine_pool()
    builder = OperatorBuilder(left.scope, name)
    first = builder.new_input(left, exchange=field_key(mine), columns=mine)
    second = builder.new_input(other, exchange=field_key(theirs), columns=theirs)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        left_stash: _Stash = {}
        right_stash: _Stash = {}

        def logic() -> None:
            _take(first, (mine, theirs), (left_stash, right_stash), True, output)
            _take(second, (theirs, mine), (right_stash, left_stash), False, output)
            _prune(left_stash, second.frontier)
            _prune(right_stash, first.frontier)

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result


# Attached, not decorated: code calling it with ``name`` calls this function (see ``attach``).
attach(Stream.join_columns)(join_columns)


def _take(
    port: InputPort,
    keys: tuple[list[str], list[str]],
    stashes: tuple[_Stash, _Stash],
    is_left: bool,
    output: OutputPort,
) -> None:
    """Match each arrived batch of one side against the other's at its time, then stash it."""
    mine, theirs = stashes
    for time, batch in port.containers():
        records = _records(batch)
        partners = theirs.get(time)
        if partners is not None:
            pairs = _pairs(records, partners.records(), keys, is_left)
            if pairs is not None:
                output.forward(time, pairs, port.port)
        side = mine.get(time)
        if side is None:
            side = mine[time] = _Side()
        side.add(records)


def _records(batch: Batch) -> pa.Array:
    import pyarrow as pa

    return batch.array if isinstance(batch, Columns) else pa.array(batch)


def _pairs(
    new: pa.Array, old: pa.Array, keys: tuple[list[str], list[str]], new_is_left: bool
) -> Columns | None:
    """The pairs of ``new`` records with ``old`` ones of equal keys, or ``None``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes_new, codes_old = _codes(
        [pc.struct_field(new, k) for k in keys[0]], [pc.struct_field(old, k) for k in keys[1]]
    )
    joined = pa.table({"code": codes_new, "i": pa.array(range(len(new)), pa.int64())}).join(
        pa.table({"code": codes_old, "j": pa.array(range(len(old)), pa.int64())}),
        keys="code",
        join_type="inner",
        use_threads=False,
    )
    if not joined.num_rows:
        return None
    taken_new = new.take(joined.column("i").combine_chunks())
    taken_old = old.take(joined.column("j").combine_chunks())
    left, right = (taken_new, taken_old) if new_is_left else (taken_old, taken_new)
    return Columns(pa.StructArray.from_arrays([left, right], names=["left", "right"]))


def _codes(new: list[pa.Array], old: list[pa.Array]) -> tuple[pa.Array, pa.Array]:
    """One int64 code per record of each side: equal codes exactly when the keys are equal.

    Each key column of both sides is dictionary-encoded together (nulls encoded as a value);
    several columns' codes are combined pairwise and encoded again, so codes stay small.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    split = len(new[0])
    combined: pa.Array | None = None
    for a, b in zip(new, old, strict=True):
        if not b.type.equals(a.type):
            try:
                b = b.cast(a.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise TypeError(f"join keys of {a.type} and {b.type} cannot be compared") from None
        both = pa.concat_arrays([a, b])
        codes = pc.dictionary_encode(both, null_encoding="encode")
        column = codes.indices.cast(pa.int64())
        if combined is None:
            combined = column
        else:
            size = len(codes.dictionary)
            mixed = pc.add(pc.multiply(combined, size), column)
            combined = pc.dictionary_encode(mixed).indices.cast(pa.int64())
    assert combined is not None
    return combined.slice(0, split), combined.slice(split)


def _prune(stash: _Stash, other_frontier: MutableAntichain[Hashable]) -> None:
    """Forget the times of one side that the other side's frontier has passed."""
    if stash:
        for time in [t for t in stash if not other_frontier.less_equal(t)]:
            del stash[time]
