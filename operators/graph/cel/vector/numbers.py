"""Arithmetic, negation and the numeric conversions on columns, with CEL's errors per row.

Arrow's plain kernels wrap on overflow and its ``divide`` raises for the whole batch on a
zero divisor; its checked kernels raise for the whole batch, naming no row. So every kernel
here is given inputs on which it cannot raise, and the rows that fail are found apart:

* ``+ - *`` on ints: the least and greatest value of each operand (one ``min_max`` pass)
  bound the result; only if the bound leaves the range is the wrapped result checked row by
  row (``+``: the operands' signs agree and the result's differs; ``*`` by a literal: the
  operand against the bounds the literal allows; ``*`` else: the product divided back);
* ``/`` and ``%``: a zero divisor (and ``MIN / -1``, ``MIN % -1``) fails the row and is
  replaced by 1 before the kernel; ``divide`` truncates and ``remainder`` takes the
  dividend's sign, as CEL; ``x % 2^k`` (a literal) on an ``x`` of no negative value is
  ``x``'s low bits (``bit_wise_and``, a third of ``remainder``'s time);
* doubles follow IEEE 754 (``1.0 / 0.0`` is infinity), as in CEL; there is no ``%``.

Which range an int result is checked against is the row backend's choice, made from the
static types (``r.u + 1u`` is uint arithmetic; ``r.u + 1`` on a uint64 field is int
arithmetic there, on a value the vector backend would have to hold beyond int64): what the
row backend does with such values has no vector form here (see :func:`arithmetic`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.convert import _to_double, _to_int, _to_string, _to_uint
from operators.graph.cel.types import INT64_MAX, INT64_MIN, UINT64_MAX
from operators.graph.cel.types import UINT as STATIC_UINT
from operators.graph.cel.vector.structure import concatenation
from operators.graph.cel.vector.values import (
    BOOL,
    DOUBLE,
    DOUBLE_SHAPE,
    ERROR,
    FAILING,
    FLOAT64,
    INT,
    INT64,
    INT_SHAPE,
    LIST,
    NULL,
    OPAQUE,
    STRING,
    UINT,
    UINT64,
    UINT_SHAPE,
    Compiled,
    Datum,
    Env,
    NotVectorizedError,
    Shape,
    Vec,
    bounds,
    by_distinct,
    either,
    found,
    strict,
    where,
)

_KERNELS: Final = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}
_ONE: Final = {INT: pa.scalar(1, INT64), UINT: pa.scalar(1, UINT64)}
_RANGES: Final = {INT: (INT64_MIN, INT64_MAX), UINT: (0, UINT64_MAX)}
_ZERO: Final = pa.scalar(0, INT64)
_ZERO_U: Final = pa.scalar(0, UINT64)
_INT64_MAX_U: Final = pa.scalar(INT64_MAX, UINT64)


def arithmetic(op: str, a: Compiled, b: Compiled, static: str) -> Compiled:
    """``a op b`` for ``+ - * / %``; ``static`` is the row backend's type of the result."""
    ka, kb = a.shape.kind, b.shape.kind
    if ERROR in (ka, kb) or NULL in (ka, kb):
        return FAILING
    if ka in (INT, UINT) and kb in (INT, UINT):
        kind = UINT if static == STATIC_UINT else INT
        if ka != kind or kb != kind:
            raise NotVectorizedError(
                "arithmetic on a uint64 value without a uint operand, or on an int value"
                " with one (the row backend computes both as ints: write 1u for a uint)"
            )
        if op in ("/", "%"):
            return _division(op, a, b, kind)
        return _integer(op, a, b, kind)
    if ka == kb == DOUBLE:
        if op == "%":
            return FAILING
        kernel = pc.divide if op == "/" else _KERNELS[op]
        return _strict(DOUBLE_SHAPE, a, b, kernel)
    if ka == kb == STRING and op == "+":
        return _strict(a.shape, a, b, lambda x, y: pc.binary_join_element_wise(x, y, ""))
    if ka == kb == LIST and op == "+":
        return concatenation(a, b)
    if OPAQUE in (ka, kb):
        raise NotVectorizedError(f"{op} on a value of Arrow type {a.shape.type}")
    return FAILING  # no such overload, on every row


def _strict(shape: Shape, a: Compiled, b: Compiled, kernel: Callable[..., Datum]) -> Compiled:
    """A kernel that cannot fail, on operands that must not be null."""
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        return Vec(kernel(x.values, y.values), strict(x, y))

    return Compiled(shape, run)


def _integer(op: str, a: Compiled, b: Compiled, kind: str) -> Compiled:
    """``+ - *`` on int64 (``kind`` int) or uint64 (uint) columns, overflow failing the row."""
    kernel = _KERNELS[op]
    first, second = a.run, b.run
    low, high = _RANGES[kind]
    # x * literal: the overflow is x out of the bounds the literal allows (a product commutes)
    factor = _int_literal(b) if op == "*" else None
    swapped = op == "*" and factor is None and _int_literal(a) is not None
    if swapped:
        factor = _int_literal(a)

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        result = kernel(x.values, y.values)
        errors = strict(x, y)
        span_x, span_y = bounds(x.values), bounds(y.values)
        if span_x is not None and span_y is not None:
            corners = [_exact(op, i, j) for i in span_x for j in span_y]
            if not low <= min(corners) <= max(corners) <= high:
                left, right = (y.values, x.values) if swapped else (x.values, y.values)
                overflow = _overflow(op, left, right, result, kind, factor)
                errors = either(errors, found(overflow))
        return Vec(result, errors)

    return Compiled(INT_SHAPE if kind == INT else UINT_SHAPE, run)


def _int_literal(node: Compiled) -> int | None:
    """The value of an int literal, else ``None``."""
    return node.literal if node.shape.kind == INT and type(node.literal) is int else None


def _exact(op: str, x: int, y: int) -> int:
    return x + y if op == "+" else x - y if op == "-" else x * y


def _overflow(op: str, x: Datum, y: Datum, result: Datum, kind: str, literal: int | None) -> Datum:
    """Where ``x op y`` (``result``, wrapped) left the range of ``kind``."""
    if kind == UINT:
        if op == "+":
            return pc.less(result, x)
        if op == "-":
            return pc.less(x, y)
        return _product_overflow(x, y, result, kind)
    if op == "+":  # the operands' signs agree and the result's differs
        return pc.less(pc.bit_wise_and(pc.bit_wise_xor(x, result), pc.bit_wise_xor(y, result)), 0)
    if op == "-":  # the operands' signs differ and the result's is not the first's
        return pc.less(pc.bit_wise_and(pc.bit_wise_xor(x, y), pc.bit_wise_xor(x, result)), 0)
    if literal is not None:
        low, high = _factor_bounds(literal)
        return pc.or_(pc.less(x, low), pc.greater(x, high))
    return _product_overflow(x, y, result, kind)


def _factor_bounds(factor: int) -> tuple[int, int]:
    """The ints ``x`` for which ``x * factor`` is in the int64 range: ``[low, high]``.

    Exact, in Python's unbounded ints: for ``factor`` > 0, ``ceil(MIN / factor)`` to
    ``floor(MAX / factor)``; for ``factor`` < 0, ``ceil(MAX / factor)`` to
    ``floor(MIN / factor)`` (dividing by a negative turns the inequalities round).
    """
    if factor == 0:
        return INT64_MIN, INT64_MAX
    if factor > 0:
        low, high = -(-INT64_MIN // factor), INT64_MAX // factor
    else:
        low, high = -(INT64_MAX // -factor), INT64_MIN // factor
    return max(low, INT64_MIN), min(high, INT64_MAX)  # (-1: MIN // -1 is beyond int64)


def _product_overflow(x: Datum, y: Datum, result: Datum, kind: str) -> Datum:
    """Where ``x * y`` overflowed: the wrapped product divided back is not ``y``.

    ``x`` is 0 (never overflows) or -1 (overflows only for ``y`` = MIN, whose product
    divided back is MIN / -1, itself an overflow) is replaced by 1 before dividing.
    """
    one = _ONE[kind]
    if kind == UINT:
        zero = pc.equal(x, _ZERO_U)
        divided = pc.divide(result, where(found(zero), one, x))
        return pc.and_(pc.invert(zero), pc.not_equal(divided, y))
    trivial = pc.or_(pc.equal(x, 0), pc.equal(x, -1))
    divided = pc.divide(result, where(found(trivial), one, x))
    wrong = pc.and_(pc.invert(trivial), pc.not_equal(divided, y))
    return pc.or_(wrong, pc.and_(pc.equal(x, -1), pc.equal(y, INT64_MIN)))


def _division(op: str, a: Compiled, b: Compiled, kind: str) -> Compiled:
    """``/`` (truncating) or ``%`` (the dividend's sign) on ints.

    A zero divisor, ``MIN / -1`` and ``MIN % -1`` fail the row (as in the row backend and
    cel-go).
    """
    kernel = pc.divide if op == "/" else pc.remainder
    first, second = a.run, b.run
    one, zero = _ONE[kind], _ZERO_U if kind == UINT else _ZERO
    low_bits = _low_bits(b, kind) if op == "%" else None

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        span_x, span_y = bounds(x.values), bounds(y.values)
        if low_bits is not None and span_x is not None and span_x[0] >= 0:
            # x % 2^k for x >= 0 is x's low k bits: a third of ``remainder``'s time
            return Vec(pc.bit_wise_and(x.values, low_bits), strict(x, y))
        bad = None
        if span_y is not None and span_y[0] <= 0 <= span_y[1]:
            bad = found(pc.equal(y.values, zero))
        if (
            kind == INT
            and span_x is not None
            and span_y is not None
            and span_x[0] == INT64_MIN
            and span_y[0] <= -1 <= span_y[1]
        ):
            minimum = pc.and_(pc.equal(x.values, INT64_MIN), pc.equal(y.values, -1))
            bad = either(bad, found(minimum))
        result = kernel(x.values, where(bad, one, y.values))
        return Vec(result, either(strict(x, y), bad))

    return Compiled(a.shape, run)


def _low_bits(divisor: Compiled, kind: str) -> pa.Scalar | None:
    """``2^k - 1`` (of ``kind``) if ``divisor`` is the literal ``2^k`` (``k`` >= 0), else None."""
    value = divisor.literal
    if type(value) is not int or value <= 0 or value & (value - 1):
        return None
    return pa.scalar(value - 1, pa.uint64() if kind == UINT else pa.int64())


def negation(a: Compiled) -> Compiled:
    """``-a``: ints fail on MIN; doubles as IEEE 754."""
    kind, operand = a.shape.kind, a.run
    if kind == DOUBLE:
        return Compiled(DOUBLE_SHAPE, lambda env: _negated(operand(env), None))
    if kind == INT:

        def run(env: Env) -> Vec:
            x = operand(env)
            span = bounds(x.values)
            overflow = None
            if span is not None and span[0] == INT64_MIN:
                overflow = found(pc.equal(x.values, INT64_MIN))
            return _negated(x, overflow)

        return Compiled(INT_SHAPE, run)
    if kind == UINT:
        raise NotVectorizedError("negating a uint64 value (the row backend computes it as an int)")
    if kind == OPAQUE:
        raise NotVectorizedError(f"- on a value of Arrow type {a.shape.type}")
    return FAILING


def _negated(x: Vec, overflow: Datum | None) -> Vec:
    return Vec(pc.negate(x.values), either(strict(x), overflow))


# --------------------------------------------------------------------------- conversions


_PARSERS: Final = {
    "int": (_to_int, INT_SHAPE),
    "uint": (_to_uint, UINT_SHAPE),
    "double": (_to_double, DOUBLE_SHAPE),
    "string": (_to_string, Shape(STRING, pa.string())),
}


def conversion(name: str, a: Compiled) -> Compiled:
    """``int()``, ``uint()``, ``double()`` or ``string()`` of ``a``.

    Parsing a string, and formatting a double (as Go's ``%g``), are the row backend's
    conversions, run once per distinct value (see :func:`by_distinct`).
    """
    kind = a.shape.kind
    if (kind == STRING and name != "string") or (kind == DOUBLE and name == "string"):
        function, shape = _PARSERS[name]
        operand = a.run

        def run(env: Env) -> Vec:
            x = operand(env)
            converted = by_distinct(x.values, function, shape.type)
            return Vec(converted.values, either(strict(x), converted.errors))

        return Compiled(shape, run)
    if kind == OPAQUE:
        raise NotVectorizedError(f"{name}() of a value of Arrow type {a.shape.type}")
    if name == "int" and kind in (INT, UINT, DOUBLE):
        return _checked_cast(a, INT_SHAPE, _int_range(kind))
    if name == "uint" and kind in (INT, UINT, DOUBLE):
        return _checked_cast(a, UINT_SHAPE, _uint_range(kind))
    if name == "double" and kind in (INT, UINT, DOUBLE):
        return _checked_cast(a, DOUBLE_SHAPE, None)
    if name == "string" and kind in (INT, UINT, STRING, BOOL):
        return _checked_cast(a, Shape(STRING, pa.string()), None)
    return FAILING


def _int_range(kind: str) -> Callable[[Datum], Datum] | None:
    """Where a value of ``kind`` is out of the int64 range (``None``: never)."""
    if kind == UINT:  # (a uint64 column compared with uint64 scalars only: Arrow would cast
        # it to int64 to compare it with an int64 one, and fail on the values beyond)
        return lambda x: pc.greater(x, _INT64_MAX_U)
    if kind == DOUBLE:  # NaN is in no range
        # -2**63 itself is out of range, as in the row backend (and cel-go)
        return lambda x: pc.invert(_within(x, math.nextafter(-(2.0**63), 0.0), 2.0**63))
    return None


def _uint_range(kind: str) -> Callable[[Datum], Datum] | None:
    """Where a value of ``kind`` is out of the uint64 range (``None``: never)."""
    if kind == INT:
        return lambda x: pc.less(x, 0)
    if kind == DOUBLE:
        return lambda x: pc.invert(_within(x, 0.0, 2.0**64))
    return None


def _within(x: Datum, low: float, high: float) -> Datum:
    """``low <= x < high``, false for NaN (and null counted false)."""
    inside = pc.and_(pc.greater_equal(x, low), pc.less(x, high))
    return pc.fill_null(inside, False) if not isinstance(inside, pa.Scalar) else inside


def _checked_cast(
    a: Compiled, shape: Shape, out_of_range: Callable[[Datum], Datum] | None
) -> Compiled:
    """``a`` cast to ``shape``'s type, failing where ``out_of_range`` says (doubles truncated)."""
    operand, target = a.run, shape.type
    double = a.shape.kind == DOUBLE and shape.kind in (INT, UINT)
    if a.shape.type == target:  # the value as it is; but a conversion of null fails

        def same(env: Env) -> Vec:
            x = operand(env)
            return Vec(x.values, strict(x))

        return Compiled(shape, same)

    def run(env: Env) -> Vec:
        x = operand(env)
        values, bad = x.values, None
        if out_of_range is not None:
            bad = found(out_of_range(values))
        if double:
            values = pc.trunc(where(bad, pa.scalar(0.0, FLOAT64), values))
        elif bad is not None:
            values = where(bad, pa.scalar(0, a.shape.type), values)
        return Vec(pc.cast(values, target, safe=False), either(strict(x), bad))

    return Compiled(shape, run)
