"""The conversions ``int()``, ``uint()``, ``double()`` and ``string()`` at run time."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Final

from operators.graph.cel.core import EvaluationError
from operators.graph.cel.types import INT64_MAX, INT64_MIN, UINT64_MAX, _type_name

_INT_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UINT_TEXT = re.compile(r"[0-9]+", re.ASCII)
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE,
)


def _to_int(value: object) -> int:
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        result = value
    elif kind is float:
        assert isinstance(value, float)
        # as cel-go: -2**63 itself is out of range (the spec's conversions/double_int_min_range)
        if not -(2.0**63) < value < 2.0**63:
            raise EvaluationError(f"int() out of range: {_to_string(value)}")
        result = int(value)
    elif kind is str:
        assert isinstance(value, str)
        if _INT_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"int() cannot convert the string {value!r}")
        result = int(value)
    else:
        raise EvaluationError(f"no such overload: int({_type_name(value)})")
    if not INT64_MIN <= result <= INT64_MAX:
        raise EvaluationError(f"int() out of range: {value}")
    return result


def _to_uint(value: object) -> int:
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        result = value
    elif kind is float:
        assert isinstance(value, float)
        if not 0.0 <= value < 2.0**64:
            raise EvaluationError(f"uint() out of range: {_to_string(value)}")
        result = int(value)
    elif kind is str:
        assert isinstance(value, str)
        if _UINT_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"uint() cannot convert the string {value!r}")
        result = int(value)
    else:
        raise EvaluationError(f"no such overload: uint({_type_name(value)})")
    if not 0 <= result <= UINT64_MAX:
        raise EvaluationError(f"uint() out of range: {value}")
    return result


_BOOL_TEXT: Final = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}
"""The strings ``bool()`` takes (Go's ``strconv.ParseBool``, as cel-go)."""


def _to_bool(value: object) -> bool:
    kind = type(value)
    if kind is bool:
        assert isinstance(value, bool)
        return value
    if kind is str:
        assert isinstance(value, str)
        result = _BOOL_TEXT.get(value)
        if result is None:
            raise EvaluationError(f"bool() cannot convert the string {value!r}")
        return result
    raise EvaluationError(f"no such overload: bool({_type_name(value)})")


def _to_double(value: object) -> float:
    kind = type(value)
    if kind is float:
        assert isinstance(value, float)
        return value
    if kind is int:
        assert isinstance(value, int)
        return float(value)
    if kind is str:
        assert isinstance(value, str)
        if _DOUBLE_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"double() cannot convert the string {value!r}")
        result = float(value)
        if math.isinf(result) and "inf" not in value.lower():
            raise EvaluationError(f"double() out of range: {value!r}")
        return result
    raise EvaluationError(f"no such overload: double({_type_name(value)})")


def _to_string(value: object) -> str:
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        return value
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        assert isinstance(value, float)
        return _format_double(value)
    raise EvaluationError(f"no such overload: string({_type_name(value)})")


def _format_double(value: float) -> str:
    """Format a double as Go's ``%g`` does (cel-go's ``string(double)``): 1e+06, 0.0001, 1.5."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        return "-0" if sign else "0"
    stripped = digits.rstrip("0")
    point = len(digits) + exponent  # the value is 0.<digits> x 10^point
    digits = stripped
    minus = "-" if sign else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"
