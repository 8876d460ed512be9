"""Run-time helpers the generated code calls.

The generated code does the common case inline and calls these for the rest. They are the only
names its globals hold besides the types it checks against.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Final, NoReturn, cast

from operators.graph.cel.convert import _to_bool, _to_double, _to_int, _to_string, _to_uint
from operators.graph.cel.core import EvaluationError
from operators.graph.cel.extensions import EXTENSIONS
from operators.graph.cel.regex import (
    _search,
    _search_counted,
    _search_dynamic,
    _search_dynamic_counted,
)
from operators.graph.cel.steps import _charge_items, _pay_repeated
from operators.graph.cel.types import (
    _PYTHON_TYPE_NAMES,
    INT,
    INT64_MAX,
    INT64_MIN,
    UINT,
    _show_key,
    _type_name,
)


def _overflow() -> NoReturn:
    raise EvaluationError("integer overflow")


def _uoverflow() -> NoReturn:
    raise EvaluationError("unsigned integer overflow")


def _no_overload(op: str, left: str, right: str) -> NoReturn:
    raise EvaluationError(f"no such overload: {left} {op} {right}")


def _fail(op: str, value: object, static: str, value_left: bool) -> NoReturn:
    """Raise for ``value op <static>`` (or the other way round): no such overload."""
    name = _type_name(value)
    _no_overload(op, *((name, static) if value_left else (static, name)))


def _arith_fail(op: str, value: object, static: str, value_left: bool) -> NoReturn:
    """Raise for an arithmetic fast path that did not apply: an overflow, or wrong types."""
    if type(value) is int and static in (INT, UINT):
        if static == INT:
            _overflow()
        _uoverflow()
    _fail(op, value, static, value_left)


def _arith(op: str, a: object, b: object) -> object:
    """``a op b`` for ``+ - *`` on operands of types known only when evaluated."""
    if type(a) is int and type(b) is int:
        result = a + b if op == "+" else a - b if op == "-" else a * b
        if not INT64_MIN <= result <= INT64_MAX:
            _overflow()
        return result
    if type(a) is float and type(b) is float:
        return a + b if op == "+" else a - b if op == "-" else a * b
    if op == "+":
        if type(a) is str and type(b) is str:
            return a + b
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return [*a, *b]
    _no_overload(op, _type_name(a), _type_name(b))


def _div(a: object, b: object) -> object:
    """CEL's ``/``: ints truncate toward zero, doubles follow IEEE 754."""
    if type(a) is int and type(b) is int:
        if b == 0:
            raise EvaluationError("division by zero")
        if b == -1 and a == INT64_MIN:
            _overflow()
        quotient = abs(a) // abs(b)
        return -quotient if (a < 0) != (b < 0) else quotient
    if type(a) is float and type(b) is float:
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    _no_overload("/", _type_name(a), _type_name(b))


def _mod(a: object, b: object) -> object:
    """CEL's ``%`` on ints: the remainder of the division truncated toward zero."""
    if type(a) is int and type(b) is int:
        if b == 0:
            raise EvaluationError("modulus by zero")
        if b == -1 and a == INT64_MIN:  # as cel-go: the quotient it comes from overflows
            _overflow()
        remainder = abs(a) % abs(b)
        return -remainder if a < 0 else remainder
    _no_overload("%", _type_name(a), _type_name(b))


_NATURAL: Final = (
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    ZeroDivisionError,
    OverflowError,
    AttributeError,
    RecursionError,
)
"""What evaluating generated code can raise: Python's own errors, and EvaluationError (a
ValueError), all turned into an EvaluationError by the expression's function."""


def _all_of(*operands: Callable[[], bool]) -> bool:
    """CEL's ``a && b && ...``: false if an operand is false, else the first error, else true.

    An operand's error is absorbed by a false operand on either side of it.
    """
    error: BaseException | None = None
    for operand in operands:
        try:
            if not operand():
                return False
        except _NATURAL as caught:
            error = caught if error is None else error
    if error is not None:
        raise error
    return True


def _any_of(*operands: Callable[[], bool]) -> bool:
    """CEL's ``a || b || ...``: true if an operand is true, else the first error, else false."""
    error: BaseException | None = None
    for operand in operands:
        try:
            if operand():
                return True
        except _NATURAL as caught:
            error = caught if error is None else error
    if error is not None:
        raise error
    return False


def _neg(value: object) -> object:
    if type(value) is int:
        assert isinstance(value, int)
        if value == INT64_MIN:
            _overflow()
        return -value
    if type(value) is float:
        assert isinstance(value, float)
        return -value
    raise EvaluationError(f"no such overload: -{_type_name(value)}")


def _not_bool(what: str, value: object) -> NoReturn:
    raise EvaluationError(f"{what} must be bool, not {_type_name(value)}")


def _ill_typed(message: str, *_operands: object) -> NoReturn:
    """What the checker would have refused, evaluated unchecked (``check=False``).

    The operands (if any) are evaluated first, as arguments: an error of theirs is raised
    instead.
    """
    raise EvaluationError(message)


def hashable(value: Any) -> Hashable:
    """``value`` as a key (for exchange, grouping and joins): lists become tuples.

    ``-0.0`` is ``0.0``: they are equal, so one key, written one way whichever came first.

    >>> hashable([1, [2, "x"], -0.0])
    (1, (2, 'x'), 0.0)
    """
    if type(value) is list or type(value) is tuple:
        return tuple(hashable(item) for item in value)
    if type(value) is dict:
        raise EvaluationError("a key cannot be a map")
    if type(value) is float:
        return value + 0.0
    return cast(Hashable, value)


_ORDER_OPS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _order(op: str, a: object, b: object) -> bool:
    """``a op b`` for ``< <= > >=`` on operands of types known only when evaluated."""
    ta, tb = type(a), type(b)
    if ta is not tb and (ta is int or ta is float) and (tb is int or tb is float):
        # an int (or uint) and a double compare as doubles, as cel-go and the spec's cases do
        # (``9223372036854775807 < 9223372036854775808.0`` is false)
        return _ORDER_OPS[op](float(a), float(b))  # type: ignore[arg-type]
    if ta is tb and ta in (int, float, str, bool):
        return _ORDER_OPS[op](a, b)
    _no_overload(op, _type_name(a), _type_name(b))


def _eq(a: object, b: object) -> bool:
    """CEL's heterogeneous equality."""
    ta, tb = type(a), type(b)
    if ta is tb and ta is not list and ta is not dict and ta is not tuple:  # faster than `in`
        return a == b
    if (ta is int or ta is float) and (tb is int or tb is float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            try:
                other = b[key]
            except (KeyError, TypeError):
                return False
            if not _eq(value, other):
                return False
        return True
    return False


def _in(value: object, container: object) -> bool:
    """CEL's ``value in container`` for a list (equality) or a map (its keys)."""
    if isinstance(container, list | tuple):
        # Python's == holds wherever CEL's does on JSON values (and also for 1 == true): its
        # scan, in C, rules most lists out; a str is equal to a str only, in both.
        if value not in container:
            return False
        return type(value) is str or any(_eq(value, item) for item in container)
    if isinstance(container, Mapping):
        if type(value) is str:
            return value in container
        return any(_eq(key, value) for key in container)
    raise EvaluationError(f"no such overload: {_type_name(value)} in {_type_name(container)}")


def _index(container: object, key: object) -> object:
    """``container[key]``: a list by a non-negative int, or a map by a key."""
    if isinstance(container, list | tuple):
        if type(key) is float:  # a whole double indexes a list (as cel-go does)
            assert isinstance(key, float)
            if not key.is_integer():
                raise EvaluationError(f"invalid list index: {key} is not a whole number")
            key = int(key)
        if type(key) is not int:
            raise EvaluationError(f"no such overload: list[{_type_name(key)}]")
        assert isinstance(key, int)
        if not 0 <= key < len(container):
            raise EvaluationError(f"index out of range: {key}")
        return container[key]
    if isinstance(container, Mapping):
        if type(key) is float:
            assert isinstance(key, float)
            if not key.is_integer():
                raise EvaluationError(f"no such key: {key}")
            key = int(key)
        try:
            return container[key]
        except KeyError:
            raise EvaluationError(f"no such key: {_show_key(key)}") from None
        except TypeError:
            raise EvaluationError(f"unsupported map key type: {_type_name(key)}") from None
    raise EvaluationError(f"no such overload: {_type_name(container)}[{_type_name(key)}]")


def _has(container: object, name: str) -> bool:
    if isinstance(container, Mapping):
        return name in container
    raise EvaluationError(f"no such overload: field selection on {_type_name(container)}")


def _map_of(keys: list[object], values: list[object]) -> dict[object, object]:
    result: dict[object, object] = {}
    for key, value in zip(keys, values, strict=True):
        if type(key) not in (str, int, bool):
            raise EvaluationError(f"unsupported map key type: {_type_name(key)}")
        if key in result:
            raise EvaluationError(f"duplicate map key: {_show_key(key)}")
        result[key] = value
    return result


def _iterable(container: object, macro: str) -> Iterable[object]:
    if isinstance(container, list | tuple | Mapping):
        return container
    raise EvaluationError(f"no such overload: {_type_name(container)}.{macro}()")


def _bad_call(name: str, receiver: object, *arg_types: str) -> NoReturn:
    arguments = ", ".join(arg_types)
    raise EvaluationError(f"no such overload: {_type_name(receiver)}.{name}({arguments})")


def _starts_with(receiver: object, prefix: object) -> bool:
    if type(receiver) is str and type(prefix) is str:
        return receiver.startswith(prefix)
    _bad_call("startsWith", receiver, _type_name(prefix))


def _ends_with(receiver: object, suffix: object) -> bool:
    if type(receiver) is str and type(suffix) is str:
        return receiver.endswith(suffix)
    _bad_call("endsWith", receiver, _type_name(suffix))


_TYPE_ERROR_MESSAGES: Final[list[tuple[re.Pattern[str], str]]] = [
    (re.compile(r"'(\S+)' not supported between instances of '(\w+)' and '(\w+)'"), "{1} {0} {2}"),
    (re.compile(r"'(\w+)' object is not subscriptable"), "field selection on {0}"),
    (re.compile(r"^(\w+) indices must be integers"), "field selection on {0}"),
    (re.compile(r"object of type '(\w+)' has no len\(\)"), "size({0})"),
    (re.compile(r"expected string or bytes-like object, got '(\w+)'"), "{0}.matches(string)"),
    (
        re.compile(r"'in <string>' requires string as left operand, not (\w+)"),
        "string.contains({0})",
    ),
]


def _translate(error: Exception) -> EvaluationError:
    """The :class:`EvaluationError` for an exception Python raised while evaluating."""
    if isinstance(error, KeyError):
        return EvaluationError(f"no such key: {_show_key(error.args[0] if error.args else None)}")
    if isinstance(error, IndexError):
        return EvaluationError("index out of range")
    if isinstance(error, ZeroDivisionError):
        return EvaluationError("division by zero")
    if isinstance(error, RecursionError):
        return EvaluationError("a value is nested too deeply")
    message = str(error)
    if isinstance(error, TypeError):
        if (unhashable := re.match(r"unhashable type: '(\w+)'", message)) is not None:
            return EvaluationError(f"unsupported map key type: {_python_type(unhashable[1])}")
        for pattern, template in _TYPE_ERROR_MESSAGES:
            match = pattern.search(message)
            if match is not None:
                names = [_python_type(group) for group in match.groups()]
                return EvaluationError("no such overload: " + template.format(*names))
    return EvaluationError(f"no such overload: {message}")


def _python_type(name: str) -> str:
    return _PYTHON_TYPE_NAMES.get(name, name)


_RUNTIME: Final[dict[str, object]] = {
    "_type": type,
    "_int": int,
    "_float": float,
    "_str": str,
    "_bool": bool,
    "_list": list,
    "_dict": dict,
    "_len": len,
    "_EvaluationError": EvaluationError,
    "_NATURAL": _NATURAL,
    "_all_of": _all_of,
    "_any_of": _any_of,
    "_translate": _translate,
    "_overflow": _overflow,
    "_uoverflow": _uoverflow,
    "_fail": _fail,
    "_arith_fail": _arith_fail,
    "_arith": _arith,
    "_div": _div,
    "_mod": _mod,
    "_neg": _neg,
    "_not_bool": _not_bool,
    "_ill_typed": _ill_typed,
    "_hashable": hashable,
    "_order": _order,
    "_eq": _eq,
    "_in": _in,
    "_index": _index,
    "_has": _has,
    "_map_of": _map_of,
    "_iterable": _iterable,
    "_bad_call": _bad_call,
    "_starts_with": _starts_with,
    "_ends_with": _ends_with,
    "_charge_items": _charge_items,
    "_pay_repeated": _pay_repeated,
    "_search": _search,
    "_search_counted": _search_counted,
    "_search_dynamic": _search_dynamic,
    "_search_dynamic_counted": _search_dynamic_counted,
    "_to_int": _to_int,
    "_to_uint": _to_uint,
    "_to_double": _to_double,
    "_to_string": _to_string,
    "_to_bool": _to_bool,
    **EXTENSIONS,
}
