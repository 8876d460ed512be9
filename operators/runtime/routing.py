"""Routing by key: :func:`stable_hash` of a record's key, and its form for columns.

:func:`stable_hash` is how the row path routes (``route`` in
:mod:`operators.runtime.channels`): record ``r`` goes to worker
``stable_hash(key(r)) % peers``. An exchange edge may carry lists and
:class:`~operators.runtime.containers.Columns` at once, so a key must reach the same worker
whichever way it travels: :func:`column_hash`
gives, for an Arrow array of keys, the ``stable_hash`` of each key as the row path
computes it from the key's Python value, with vectorized kernels and no Python call per
record:

* an integer in ``[0, 2**64)`` is its own hash (a non-negative signed integer, any unsigned
  one, a bool, a float that is a whole number in that range) and is cast, not hashed;
* every other key (a negative integer, a string, bytes, a fractional float, a whole float
  outside the range, a null) is hashed once per *distinct* value in the batch: the array is
  dictionary-encoded, the dictionary's values hashed by ``stable_hash`` itself, and the
  hashes taken back to the rows;
* a key of several columns (a struct array, or several arrays) hashes as the tuple of its
  parts: ``stable_hash`` of a tuple is BLAKE2b over the parts' 64-bit hashes, so each part's
  hash column is read as 8-byte values, the parts joined row by row into one binary column,
  and its distinct values digested.

:func:`route_columns` then splits a batch into ``peers`` parts, part ``hash % peers``, each a
zero-copy slice when the batch goes to one worker whole, else one ``filter`` per part (the
records keep their order within a part, as the row path keeps it).
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeAlias

from operators.runtime.containers import Columns

if TYPE_CHECKING:
    import pyarrow as pa

ColumnKey: TypeAlias = "Sequence[str] | Callable[[Columns], pa.Array]"
"""How an exchange finds the keys of a batch of columns: the names of the fields of its
struct records (one name: that field is the key; several: the tuple of them), or a function
of the batch giving one key per record (a struct array: a tuple key of its fields)."""

_LITTLE = sys.byteorder == "little"

MASK = 0xFFFF_FFFF_FFFF_FFFF
"""The largest key that is its own hash."""


def digest(data: bytes) -> int:
    """The 64-bit BLAKE2b digest of ``data``, as :func:`stable_hash` takes it of most keys."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def stable_hash(key: object) -> int:
    """A hash of ``key`` that is the same in every process and every run.

    Python's ``hash`` of strings and bytes is salted per process, so records would route
    differently on different machines; this one is not. Like ``hash``, it is equal for equal
    keys (``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``), so equal keys meet on one
    worker. Integers in ``[0, 2**64)`` map to themselves (so ``key % peers`` spreads
    consecutive keys evenly), other keys through BLAKE2b.

    >>> stable_hash(7), stable_hash(True), stable_hash(7.0), stable_hash("a") == stable_hash("a")
    (7, 1, 7, True)
    """
    if type(key) is int:
        if 0 <= key <= MASK:
            return key
        return digest(key.to_bytes((key.bit_length() + 8) // 8, "little", signed=True))
    if isinstance(key, bool):
        return int(key)
    if isinstance(key, str):
        return digest(key.encode())
    if isinstance(key, bytes):
        return digest(key)
    if isinstance(key, float):
        if key.is_integer():
            return stable_hash(int(key))
        return digest(struct.pack("<d", key))
    if isinstance(key, tuple):
        return digest(b"".join((stable_hash(part) & MASK).to_bytes(8, "little") for part in key))
    if key is None:
        return digest(b"None")
    raise TypeError(
        f"cannot route by a key of type {type(key).__name__}: use an int, str, bytes, "
        "float, bool, None, or a tuple of these"
    )


def field_key(names: Sequence[str]) -> Callable[[Any], object]:
    """The row key of field names: a record routes by it as its columns route by the names.

    ``r[name]`` for one name, ``(r[n0], r[n1], ...)`` for several.

    >>> field_key(["a"])({"a": 1, "b": 2}), field_key(["b", "a"])({"a": 1, "b": 2})
    (1, (2, 1))
    """
    if isinstance(names, str):
        raise TypeError(f"field names are a sequence of names: [{names!r}], not {names!r}")
    return itemgetter(*names)


def _digest_dictionary(values: pa.Array) -> pa.Array:
    """``stable_hash`` of each value of a (small: distinct values) array, as uint64."""
    import pyarrow as pa

    return pa.array([stable_hash(v) for v in values.to_pylist()], pa.uint64())


def _hash_by_dictionary(keys: pa.Array) -> pa.Array:
    """The hash of every key, computed once per distinct key (nulls hash as ``None``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = keys if pa.types.is_dictionary(keys.type) else pc.dictionary_encode(keys)
    hashes = pc.take(_digest_dictionary(encoded.dictionary), encoded.indices)
    if hashes.null_count:
        hashes = pc.fill_null(hashes, pa.scalar(stable_hash(None), pa.uint64()))
    return hashes


def _own(keys: pa.Array, is_own: pa.Array) -> pa.Array:
    """The keys that are their own hash as uint64; the others hashed per distinct value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_own.null_count:
        is_own = pc.fill_null(is_own, False)
    if is_own.true_count == len(keys):
        return pc.cast(keys, pa.uint64(), safe=False)
    others = pc.if_else(is_own, pa.scalar(None, keys.type), keys)
    hashed = _hash_by_dictionary(others)
    if is_own.true_count == 0:
        return hashed
    return pc.if_else(is_own, pc.cast(keys, pa.uint64(), safe=False), hashed)


def _whole_in_range(keys: pa.Array) -> pa.Array:
    """Which floats are whole numbers in ``[0, 2**64)`` (``stable_hash`` takes them as ints)."""
    import pyarrow.compute as pc

    whole = pc.equal(pc.floor(keys), keys)  # false for NaN
    in_range = pc.and_(pc.greater_equal(keys, 0.0), pc.less(keys, 2.0**64))  # no infinities
    return pc.and_(whole, in_range)


def _tuple_hash(parts: list[pa.Array]) -> pa.Array:
    """``stable_hash`` of the tuple of each row's parts (each part's hashes given, uint64).

    That is BLAKE2b over the parts' hashes as 8 little-endian bytes each: each hash column's
    buffer is read as 8-byte values, the parts joined row by row into one binary value, and
    the distinct values digested.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    as_bytes = [_little_endian_bytes(part) for part in parts]
    joined = pc.binary_join_element_wise(*as_bytes, b"")
    encoded = pc.dictionary_encode(joined)
    digests = pa.array([digest(v) for v in encoded.dictionary.to_pylist()], pa.uint64())
    return pc.take(digests, encoded.indices)


def _little_endian_bytes(hashes: pa.Array) -> pa.Array:
    """Each uint64 hash (no nulls) as its 8 little-endian bytes, a binary array."""
    import pyarrow as pa

    if not _LITTLE:  # an Arrow buffer is in the machine's order; stable_hash packs little
        return pa.array([h.to_bytes(8, "little") for h in hashes.to_pylist()], pa.binary())
    values = hashes.buffers()[1]
    fixed = pa.Array.from_buffers(pa.binary(8), len(hashes), [None, values], offset=hashes.offset)
    return fixed.cast(pa.binary())


def column_hash(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``stable_hash`` of every key of ``keys`` (its Python value), as a uint64 array.

    A struct array's rows are tuples of its fields. :class:`TypeError`, as ``stable_hash``
    raises it, for keys of a type it cannot hash (lists, maps, timestamps, ...).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    kind = keys.type
    if pa.types.is_dictionary(kind):
        dictionary_hashes = column_hash(keys.dictionary)
        hashes = pc.take(dictionary_hashes, keys.indices)
        return _nulls_as_none(hashes)
    if pa.types.is_struct(kind):
        return _tuple_hash([column_hash(keys.field(i)) for i in range(kind.num_fields)])
    if pa.types.is_boolean(kind) or pa.types.is_unsigned_integer(kind):
        return _nulls_as_none(pc.cast(keys, pa.uint64()))
    if pa.types.is_signed_integer(kind):
        return _own(keys, pc.greater_equal(keys, pa.scalar(0, kind)))
    if pa.types.is_floating(kind):
        if kind != pa.float64():  # exactly as Python sees a float16 or float32: a double
            keys = pc.cast(keys, pa.float64())
        return _own(keys, _whole_in_range(keys))
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_null(kind)
    ):
        return _hash_by_dictionary(keys)
    raise TypeError(
        f"cannot route by a key column of type {kind}: use integers, floats, bools, strings, "
        "bytes, or a struct (a tuple) of these"
    )


def _nulls_as_none(hashes: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if hashes.null_count:
        return pc.fill_null(hashes, pa.scalar(stable_hash(None), pa.uint64()))
    return hashes


def keys_of(batch: Columns, key: ColumnKey) -> pa.Array:
    """The keys of ``batch``'s records: fields of its struct records, or ``key(batch)``."""
    import pyarrow as pa

    if callable(key):
        keys = key(batch)
        if isinstance(keys, pa.RecordBatch | pa.Table):
            keys = keys.to_struct_array()
        return keys
    array = batch.array
    if not pa.types.is_struct(array.type):
        raise TypeError(f"routing by fields {list(key)} needs struct records, not {array.type}")
    fields = [array.field(name) for name in key]
    if len(fields) == 1:
        return fields[0]
    return pa.StructArray.from_arrays(fields, [str(i) for i in range(len(fields))])


def route_columns(batch: Columns, key: ColumnKey, peers: int) -> list[Columns | None]:
    """``batch`` split into ``peers`` parts (``None`` for an empty one).

    Record ``r`` goes to part ``stable_hash(key of r) % peers``, in order: exactly as the row
    path splits the batch's rows.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(batch):
        return [None] * peers
    keys = keys_of(batch, key)
    if len(keys) != len(batch):
        raise ValueError(f"the column key gave {len(keys)} keys for {len(batch)} records")
    parts = pc.modulo(column_hash(keys), pa.scalar(peers, pa.uint64()))
    low, high = pc.min_max(parts).values()
    if low == high:  # the whole batch goes to one worker: as it is, no copy
        routed: list[Columns | None] = [None] * peers
        routed[low.as_py()] = batch
        return routed
    array = batch.array
    routed = []
    for peer in range(peers):
        mask = pc.equal(parts, pa.scalar(peer, pa.uint64()))
        chosen = array.filter(mask)
        routed.append(Columns(chosen) if len(chosen) else None)
    return routed
