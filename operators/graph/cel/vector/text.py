r"""String functions on columns, and ``size``.

* ``size`` counts code points (``utf8_length``), as CEL and Python do, elements of a list, or
  the keys of a map (a struct's fields);
* ``contains``, ``startsWith`` and ``endsWith`` take a literal string, matched literally;
* ``matches`` takes a literal pattern, checked at submission by RE2 (the row backend) and
  here by Arrow's RE2 (both RE2: ``\d``, ``\w``, ``\s`` and ``\b`` are ASCII, the search
  linear), compiled by Arrow once per batch; a string whose search would cost more than the
  step limit fails as in the row backend (its bytes times the pattern's program size);
* ``lower`` and ``upper`` map ASCII with Arrow's ASCII kernels; a batch with other
  characters maps each distinct string with Python's ``str.lower``/``str.upper`` (the row
  backend's, whose Unicode mapping Arrow's ``utf8_*`` kernels do not follow: ``"İ".lower()``).
* of the strings extension, ``lowerAscii`` and ``upperAscii`` are Arrow's ASCII kernels (which
  leave other characters alone, as cel-go does), and ``replace`` with literal strings (the
  searched one not empty) and a literal limit is ``replace_substring``; the others have no
  vector form (indices counted in code points, Go's space and split rules), and run by rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.regex import _REGEX_COST_DIVISOR
from operators.graph.cel.vector.values import (
    BOOL_SHAPE,
    FAILING,
    INT64,
    INT_SHAPE,
    LIST,
    OPAQUE,
    STRING,
    STRUCT,
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
)

_SUBSTRING: Final[dict[str, Callable[..., Datum]]] = {
    "contains": pc.match_substring,
    "startsWith": pc.starts_with,
    "endsWith": pc.ends_with,
}


def size(a: Compiled) -> Compiled:
    """``size(a)``: of a string, a list or a map (a struct); else no such overload."""
    kind, operand = a.shape.kind, a.run
    if kind == OPAQUE:
        raise NotVectorizedError(f"size() of a value of Arrow type {a.shape.type}")
    if kind == STRING:
        measure: Callable[[Datum], Datum] = pc.utf8_length
    elif kind == LIST:
        measure = pc.list_value_length
    elif kind == STRUCT:
        count = pa.scalar(a.shape.type.num_fields, INT64)
        measure = lambda _values: count  # noqa: E731  (a lambda reads better here)
    else:
        return FAILING  # no such overload

    def run(env: Env) -> Vec:
        x = operand(env)
        return Vec(pc.cast(measure(x.values), INT64), strict(x))

    return Compiled(INT_SHAPE, run)


def substring(name: str, a: Compiled, argument: Compiled) -> Compiled:
    """``a.contains(s)``, ``a.startsWith(s)`` or ``a.endsWith(s)`` for a literal string ``s``."""
    if a.shape.kind == OPAQUE:
        raise NotVectorizedError(f"{name}() on a value of Arrow type {a.shape.type}")
    if not (argument.shape.kind == STRING and isinstance(argument.literal, str)):
        raise NotVectorizedError(f"{name} with an argument that is not a literal string")
    if a.shape.kind != STRING:
        return FAILING
    kernel, pattern, operand = _SUBSTRING[name], argument.literal, a.run

    def run(env: Env) -> Vec:
        x = operand(env)
        return Vec(_scalar_safe(kernel, x.values, pattern=pattern), strict(x))

    return Compiled(BOOL_SHAPE, run)


def matches(a: Compiled, pattern: object, program: int, max_steps: int) -> Compiled:
    """``a.matches(pattern)`` for a literal ``pattern`` of RE2 program size ``program``."""
    if a.shape.kind == OPAQUE:
        raise NotVectorizedError(f"matches() on a value of Arrow type {a.shape.type}")
    if not isinstance(pattern, str):
        raise NotVectorizedError("matches with a pattern that is not a literal")
    try:  # the row backend's RE2 took it at submission; Arrow's must too
        pc.match_substring_regex(pa.array([""], pa.string()), pattern=pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise NotVectorizedError(f"matches with a pattern Arrow does not take: {error}") from None
    if a.shape.kind != STRING:
        return FAILING
    # The row backend fails a string whose bytes times the program size, divided by
    # _REGEX_COST_DIVISOR, are over max_steps: the least such size in bytes.
    too_long = -(-_REGEX_COST_DIVISOR * (max_steps + 1) // program)
    operand = a.run

    def run(env: Env) -> Vec:
        x = operand(env)
        errors = strict(x)
        size = pc.cast(pc.binary_length(x.values), INT64)
        span = bounds(size)
        if span is not None and span[1] >= too_long:
            errors = either(errors, found(pc.greater_equal(size, too_long)))
        values = _scalar_safe(pc.match_substring_regex, x.values, pattern=pattern)
        return Vec(values, errors)

    return Compiled(BOOL_SHAPE, run)


def case(name: str, a: Compiled) -> Compiled:
    """``a.lower()`` or ``a.upper()`` (see the module)."""
    if a.shape.kind == OPAQUE:
        raise NotVectorizedError(f"{name}() on a value of Arrow type {a.shape.type}")
    if a.shape.kind != STRING:
        return FAILING
    ascii_kernel = pc.ascii_lower if name == "lower" else pc.ascii_upper
    python = str.lower if name == "lower" else str.upper
    operand = a.run

    def run(env: Env) -> Vec:
        x = operand(env)
        values = x.values
        if isinstance(values, pa.Scalar):
            return Vec(by_distinct(values, python, pa.string()).values, strict(x))
        if pc.all(pc.string_is_ascii(values)).as_py() is not False:
            return Vec(ascii_kernel(values), strict(x))
        return Vec(by_distinct(values, python, pa.string()).values, strict(x))

    return Compiled(Shape(STRING, pa.string()), run)


def extension(name: str, a: Compiled, args: list[Compiled]) -> Compiled:
    """A method of the strings extension (see the module)."""
    if a.shape.kind == OPAQUE:
        raise NotVectorizedError(f"{name}() on a value of Arrow type {a.shape.type}")
    if name in ("lowerAscii", "upperAscii"):
        kernel: Callable[..., Datum] = pc.ascii_lower if name == "lowerAscii" else pc.ascii_upper
        options: dict[str, object] = {}
    elif name == "replace" and _literal_replace(args):
        kernel = pc.replace_substring
        limit = args[2].literal if len(args) == 3 else -1
        options = {"pattern": args[0].literal, "replacement": args[1].literal}
        if isinstance(limit, int) and limit >= 0:
            options["max_replacements"] = limit
    else:
        raise NotVectorizedError(f"the strings extension's {name}()")
    if a.shape.kind != STRING:
        return FAILING
    operand = a.run

    def run(env: Env) -> Vec:
        x = operand(env)
        return Vec(_scalar_safe(kernel, x.values, **options), strict(x))

    return Compiled(Shape(STRING, pa.string()), run)


def _literal_replace(args: list[Compiled]) -> bool:
    """Whether ``replace`` takes literal strings (the first not empty) and a literal limit."""
    old, new = args[0].literal, args[1].literal
    limit = args[2].literal if len(args) == 3 else -1
    return isinstance(old, str) and old != "" and isinstance(new, str) and type(limit) is int


def _scalar_safe(kernel: Callable[..., Datum], values: Datum, **options: object) -> Datum:
    """``kernel(values)``: string kernels take arrays only, so a scalar goes as an array of 1."""
    if isinstance(values, pa.Scalar):
        return kernel(pa.array([values.as_py()], pa.string()), **options)[0]
    return kernel(values, **options)
