"""Equality, ordering and ``in`` on columns, as CEL (and the row backend) define them.

* Equality is CEL's heterogeneous equality: values of different kinds are unequal (not an
  error), but for numbers, which compare by value across ``int``, ``uint`` and ``double``;
  ``null`` equals ``null`` only.
* Ordering compares numbers across kinds, strings by code point (UTF-8's byte order is code
  point order) and bools; anything else, and a null, fails the row.
* An int and a double order as doubles (Arrow's cast, the row backend's and cel-go's:
  ``9223372036854775807 < 9223372036854775808.0`` is false), but are equal only if exactly
  so, as in the row backend: Arrow would cast the int to a double, and
  ``2**53 + 1 == 2.0**53`` would be true. Where the ints are within
  ``±2**53`` (one ``min_max`` pass says so) the cast is exact; else the rows beyond it compare
  with the double's floor or ceiling as an int (see :func:`_int_vs_double`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.types import INT64_MAX
from operators.graph.cel.vector.structure import plain
from operators.graph.cel.vector.values import (
    BOOL,
    BOOL_SHAPE,
    DOUBLE,
    ERROR,
    FAILING,
    FLOAT64,
    INT,
    INT64,
    LIST,
    NUMERIC,
    OPAQUE,
    STRING,
    STRUCT,
    UINT,
    UINT64,
    Compiled,
    Datum,
    Env,
    NotVectorizedError,
    Shape,
    Vec,
    bounds,
    conform,
    either,
    element_shape,
    field_shape,
    nulls,
    per_row,
    positions,
    strict,
    where,
)

_KERNELS: Final[dict[str, Callable[..., Datum]]] = {
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
_FLIPPED: Final = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_EXACT_DOUBLE: Final = 2**53
"""Ints up to this size are doubles exactly."""


def ordering(op: str, a: Compiled, b: Compiled) -> Compiled:
    """``a op b`` for ``< <= > >=``."""
    ka, kb = a.shape.kind, b.shape.kind
    if OPAQUE in (ka, kb):
        raise NotVectorizedError(f"{op} on a value of Arrow type {a.shape.type}")
    if ka in NUMERIC and kb in NUMERIC:
        compare = _numbers(op, ka, kb)
    elif ka == kb and ka in (STRING, BOOL):
        compare = _KERNELS[op]
    else:
        return FAILING  # no such overload (a null, or kinds that do not order)
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        return Vec(compare(x.values, y.values), strict(x, y))

    return Compiled(BOOL_SHAPE, run)


def equality(op: str, a: Compiled, b: Compiled) -> Compiled:
    """``a == b`` or ``a != b``: heterogeneous equality (see the module)."""
    equal = _equality(a, b)
    if op == "==" or equal is FAILING:  # (failing rows have null values, of no type to invert)
        return equal
    inner = equal.run
    return Compiled(BOOL_SHAPE, lambda env: _inverted(inner(env)))


def _inverted(vec: Vec) -> Vec:
    return Vec(pc.invert(vec.values), vec.errors)


def _equality(a: Compiled, b: Compiled) -> Compiled:
    """``a == b``: its values are never null (an error fails the row)."""
    if ERROR in (a.shape.kind, b.shape.kind):
        return FAILING
    compare = _equal_function(a.shape, b.shape)
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        return Vec(_equal(x.values, y.values, compare), either(x.errors, y.errors))

    return Compiled(BOOL_SHAPE, run)


def _equal_function(a: Shape, b: Shape) -> Callable[[Datum, Datum], Datum] | None:
    """The kernel comparing non-null values of shapes ``a`` and ``b``.

    ``None`` for kinds that differ (and maps of different keys): they are equal only where
    both are null. Lists and maps (structs) compare element by element (see
    :func:`_lists_equal`, :func:`_structs_equal`).
    """
    ka, kb = a.kind, b.kind
    if OPAQUE in (ka, kb):
        raise NotVectorizedError(f"== on {a.type if ka == OPAQUE else b.type}")
    if ka == kb == LIST:
        items = _equal_function(element_shape(a), element_shape(b))
        types = (a.type.value_type, b.type.value_type)
        return lambda x, y: _lists_equal(x, y, items, types)
    if ka == kb == STRUCT:
        names = [f.name for f in a.type]
        if sorted(names) != sorted(f.name for f in b.type):
            return None  # maps of different keys
        fields = [(name, _field_function(a, b, name)) for name in names]
        return lambda x, y: _structs_equal(x, y, fields)
    if ka in NUMERIC and kb in NUMERIC:
        return _numbers("==", ka, kb)
    if ka == kb and ka in (STRING, BOOL):
        return pc.equal  # type: ignore[no-any-return]
    return None


def _field_function(a: Shape, b: Shape, name: str) -> tuple[Any, Any, Any]:
    """How to compare the field ``name`` of two maps: its kernel, and each side's Arrow type."""
    shape_a, shape_b = field_shape(a, name), field_shape(b, name)
    assert shape_a is not None and shape_b is not None
    arrow_a, arrow_b = a.type.field(name).type, b.type.field(name).type
    return _equal_function(shape_a, shape_b), arrow_a, arrow_b


def _structs_equal(x: Datum, y: Datum, fields: list[tuple[str, Any]]) -> Datum:
    """Maps of the same keys: equal where every field is (false where either is null)."""
    result: Datum = pc.and_(pc.is_valid(x), pc.is_valid(y))
    for name, (compare, arrow_x, arrow_y) in fields:
        left, right = conform(x.field(name), arrow_x), conform(y.field(name), arrow_y)
        result = pc.and_(result, _equal(left, right, compare))
    return result


def _lists_equal(
    x: Datum, y: Datum, items: Callable[[Datum, Datum], Datum] | None, types: tuple[Any, Any]
) -> Datum:
    """Lists of the same length whose elements are equal, in order (false where one is null).

    Each element of ``x`` is compared with the element of ``y`` at the same place in its
    row's list (found from the lists' offsets), on the rows whose lengths agree; a row is
    equal if none of its elements differs.
    """
    length_x = pc.fill_null(pc.cast(pc.list_value_length(x), INT64), -1)
    length_y = pc.fill_null(pc.cast(pc.list_value_length(y), INT64), -2)
    same = pc.equal(length_x, length_y)
    parents = pc.list_parent_indices(x)
    counts = pc.if_else(pc.less(length_x, 0), 0, length_x)
    starts = pc.subtract(pc.cumulative_sum(counts), counts)  # each row's first element
    local = pc.subtract(positions(len(parents)), pc.take(starts, parents))
    aligned = pc.take(same, parents)
    at = pc.add(pc.take(pc.cast(y.offsets[:-1], INT64), parents), local)
    other = pc.take(y.values, pc.if_else(aligned, at, pa.scalar(None, INT64)))
    mine = conform(pc.list_flatten(x), types[0])
    equal = _equal(mine, conform(other, types[1]), items)
    differ = pc.and_(aligned, pc.invert(pc.fill_null(equal, False)))
    return pc.and_(same, pc.equal(per_row(differ, counts), 0))


def _equal(x: Datum, y: Datum, compare: Callable[[Datum, Datum], Datum] | None) -> Datum:
    """``x == y`` where a null is CEL's null: equal to a null, unequal to anything else."""
    null_x, null_y = nulls(x), nulls(y)
    both = (
        pc.and_(pc.is_null(x), pc.is_null(y)) if null_x is not None and null_y is not None else None
    )
    if compare is None:
        return both if both is not None else pa.scalar(False)
    result = compare(x, y)
    if null_x is None and null_y is None:
        return result
    result = pc.fill_null(result, False)
    return result if both is None else pc.or_(result, both)


# --------------------------------------------------------------------------- numbers


def _numbers(op: str, ka: str, kb: str) -> Callable[[Datum, Datum], Datum]:
    """``x op y`` on numbers of kinds ``ka`` and ``kb``, exactly."""
    if ka == kb:
        return _KERNELS[op]
    if ka == DOUBLE:  # the int on the left
        flipped = _numbers(_FLIPPED[op], kb, ka)
        return lambda x, y: flipped(y, x)
    if kb == DOUBLE:
        return lambda x, y: _int_vs_double(op, x, y, ka == UINT)
    if ka == UINT:  # int64 on the left
        flipped = _numbers(_FLIPPED[op], kb, ka)
        return lambda x, y: flipped(y, x)
    return lambda x, y: _int_vs_uint(op, x, y)


def _constant(op: str, less: bool) -> pa.Scalar:
    """The value of ``x op y`` where ``x < y`` (``less``) or ``x > y`` is known."""
    value = {"==": False, "!=": True, "<": less, "<=": less, ">": not less, ">=": not less}
    return pa.scalar(value[op])


def _int_vs_uint(op: str, x: Datum, y: Datum) -> Datum:
    """``x op y`` for int64 ``x``, uint64 ``y``: a ``y`` beyond int64 is greater than any ``x``."""
    span = bounds(y)
    if span is None or span[1] <= INT64_MAX:
        return _KERNELS[op](x, pc.cast(y, INT64, safe=False))
    big = pc.greater(y, pa.scalar(INT64_MAX, UINT64))  # (uint64 with uint64: see numbers.py)
    small = pc.cast(where(big, pa.scalar(0, UINT64), y), INT64, safe=False)
    return pc.if_else(big, _constant(op, less=True), _KERNELS[op](x, small))


def _int_vs_double(op: str, x: Datum, y: Datum, unsigned: bool) -> Datum:
    """``x op y`` for int64 (or uint64) ``x``, float64 ``y``, exactly.

    Where ``|x| <= 2**53``, ``x`` is a double exactly. Beyond, ``y`` (if in ``x``'s range:
    else it is above or below every ``x``, or NaN) compares as its floor or ceiling, ints:
    ``x < y`` is ``x < ceil(y)``, ``x <= y`` is ``x <= floor(y)``, ``x == y`` is ``floor(y) ==
    ceil(y) == x``.
    """
    simple = _KERNELS[op](pc.cast(x, FLOAT64, safe=False), y)
    if op not in ("==", "!="):  # ordered as doubles (see the module)
        return simple
    span = bounds(x)
    if span is None or (span[0] >= -_EXACT_DOUBLE and span[1] <= _EXACT_DOUBLE):
        return simple
    itype = UINT64 if unsigned else INT64
    low, high = (0.0, 2.0**64) if unsigned else (-(2.0**63), 2.0**63)
    inside = pc.fill_null(pc.and_(pc.greater_equal(y, low), pc.less(y, high)), False)
    safe = where(pc.invert(inside), pa.scalar(0.0, FLOAT64), y)
    floor = pc.cast(pc.floor(safe), itype, safe=False)
    ceil = pc.cast(pc.ceil(safe), itype, safe=False)
    if op in ("==", "!="):
        exact = pc.and_(pc.equal(floor, ceil), pc.equal(x, floor))
        exact = exact if op == "==" else pc.invert(exact)
        outside = pa.scalar(op == "!=")
    else:
        edge = ceil if op in ("<", ">=") else floor
        exact = _KERNELS[op](x, edge)
        # beyond the range: above every x (< and <= hold), below (> and >=), or NaN (none)
        outside = pc.greater_equal(y, high) if op in ("<", "<=") else pc.less(y, low)
    large = pc.greater(x, pa.scalar(_EXACT_DOUBLE, itype))
    if not unsigned:  # (a uint64 column is not compared with a negative number)
        large = pc.or_(large, pc.less(x, -_EXACT_DOUBLE))
    return pc.if_else(large, pc.if_else(inside, exact, outside), simple)


# --------------------------------------------------------------------------- in


def contained(a: Compiled, b: Compiled) -> Compiled:
    """``a in b`` for ``b`` not a list literal: an element of a list, or a key of a map."""
    if b.shape.kind == STRUCT:
        return _key_of(a, b)
    if b.shape.kind == OPAQUE or a.shape.kind == OPAQUE:
        raise NotVectorizedError("in on a value of an Arrow type CEL has no operation on")
    if b.shape.kind != LIST or a.shape.kind == ERROR:
        return FAILING  # no such overload
    compare = _equal_function(a.shape, element_shape(b.shape))
    element = b.shape.type.value_type
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        lists = plain(y.values)
        parents = pc.list_parent_indices(lists)
        mine = x.values if isinstance(x.values, pa.Scalar) else pc.take(x.values, parents)
        hits = _equal(mine, conform(pc.list_flatten(lists), element), compare)
        lengths = pc.fill_null(pc.cast(pc.list_value_length(lists), INT64), 0)
        return Vec(pc.greater(per_row(hits, lengths), 0), either(x.errors, strict(y)))

    return Compiled(BOOL_SHAPE, run)


def membership(a: Compiled, items: list[Compiled]) -> Compiled:
    """``a in [items]``.

    ``a`` is evaluated once, then compared with every item (equal, as ``==`` says); the
    items of ``a``'s kind that are literals (strings, ints, uints, bools) are looked up at
    once.
    """
    if a.shape.kind == ERROR or any(item.shape.kind == ERROR for item in items):
        return FAILING
    kind = a.shape.kind
    lookup = [i.literal for i in items if i.literal is not None and i.shape.kind == kind]
    value_set = None
    if kind in (STRING, INT, UINT, BOOL) and len(lookup) > 1:
        value_set = pa.array(lookup, a.shape.type)
        items = [i for i in items if not (i.literal is not None and i.shape.kind == kind)]
    tests = [(item.run, _equal_function(a.shape, item.shape)) for item in items]
    first = a.run

    def run(env: Env) -> Vec:
        x = first(env)
        errors, hit = x.errors, _looked_up(x.values, value_set)
        for item, compare in tests:
            y = item(env)
            hit = pc.or_(hit, _equal(x.values, y.values, compare))
            errors = either(errors, y.errors)
        return Vec(hit, errors)

    return Compiled(BOOL_SHAPE, run)


def _looked_up(x: Datum, value_set: pa.Array | None) -> Datum:
    """Whether ``x`` (null: false) is one of ``value_set``."""
    if value_set is None:
        return pa.scalar(False)
    if isinstance(x, pa.Scalar):
        return pa.scalar(x.is_valid and x.as_py() in value_set.to_pylist())
    return pc.fill_null(pc.is_in(x, value_set=value_set), False)


def _key_of(a: Compiled, b: Compiled) -> Compiled:
    """``a in m`` for a map of known keys (a struct): a string equal to a key's name."""
    names = pa.array([field.name for field in b.shape.type], pa.string())
    kind = a.shape.kind
    if kind == OPAQUE:
        raise NotVectorizedError(f"in on a value of Arrow type {a.shape.type}")
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, m = first(env), second(env)
        errors = either(x.errors, m.errors, nulls(m.values))
        if kind != STRING:
            return Vec(pa.scalar(False), errors)  # the keys are strings
        return Vec(_looked_up(x.values, names), errors)

    return Compiled(BOOL_SHAPE, run)
