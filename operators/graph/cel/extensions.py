"""The strings extension and ``math.greatest``/``math.least`` at run time.

As cel-go defines them (``ext/strings.go``, ``ext/math.go``): indices count code points (a
Python ``str``'s characters), an index out of range is an error (``index out of range: 30``),
an argument of the wrong type is ``no such overload``. ``trim`` removes what Go's
``unicode.IsSpace`` calls space (not the zero-width spaces); ``lowerAscii`` and ``upperAscii``
map ASCII letters only; ``split`` and ``replace`` with a limit are Go's ``SplitN`` and
``Replace`` (a negative limit is no limit, 0 gives ``[]`` and the string unchanged).
``format`` is cel-spec's (its ``string_ext`` cases), with a precision of at most
:data:`MAX_PRECISION`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final, NoReturn

from operators.graph.cel.convert import _format_double
from operators.graph.cel.core import EvaluationError
from operators.graph.cel.types import _type_name

_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
"""Go's ``unicode.IsSpace``: Unicode's White_Space characters."""
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_QUOTED: Final = str.maketrans(
    {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
)


def _no_overload(name: str, receiver: object, args: Sequence[object]) -> NoReturn:
    types = ", ".join(_type_name(arg) for arg in args)
    raise EvaluationError(f"no such overload: {_type_name(receiver)}.{name}({types})")


def _out_of_range(index: int) -> NoReturn:
    raise EvaluationError(f"index out of range: {index}")


def _is_int(value: object) -> bool:
    return type(value) is int


def _strings(name: str, receiver: object, args: Sequence[object], ints: int = 0) -> None:
    """Check ``receiver.name(*args)``: a string, then strings, then ``ints`` ints last."""
    texts = len(args) - ints
    if (
        type(receiver) is not str
        or any(type(arg) is not str for arg in args[:texts])
        or any(type(arg) is not int for arg in args[texts:])
    ):
        _no_overload(name, receiver, args)


def _char_at(s: object, index: object) -> str:
    _strings("charAt", s, [index], ints=1)
    assert isinstance(s, str) and isinstance(index, int)
    if not 0 <= index <= len(s):
        _out_of_range(index)
    return s[index : index + 1]


def _index_of(s: object, sub: object, *offset: object) -> int:
    _strings("indexOf", s, [sub, *offset], ints=len(offset))
    assert isinstance(s, str) and isinstance(sub, str)
    start = offset[0] if offset else 0
    assert isinstance(start, int)
    if sub == "":
        return start
    if not 0 <= start < len(s):
        _out_of_range(start)
    return s.find(sub, start)


def _last_index_of(s: object, sub: object, *offset: object) -> int:
    _strings("lastIndexOf", s, [sub, *offset], ints=len(offset))
    assert isinstance(s, str) and isinstance(sub, str)
    if not offset:
        if sub == "":
            return len(s)
        if len(sub) > len(s):
            return -1
        start = len(s) - 1
    else:
        start = offset[0]  # type: ignore[assignment]
        assert isinstance(start, int)
        if sub == "":
            return start
    if not 0 <= start < len(s):
        _out_of_range(start)
    # the last match starting at or before start
    return s.rfind(sub, 0, start + len(sub))


def _lower_ascii(s: object) -> str:
    _strings("lowerAscii", s, [])
    assert isinstance(s, str)
    return s.translate(_ASCII_LOWER)


def _upper_ascii(s: object) -> str:
    _strings("upperAscii", s, [])
    assert isinstance(s, str)
    return s.translate(_ASCII_UPPER)


def _trim(s: object) -> str:
    _strings("trim", s, [])
    assert isinstance(s, str)
    return s.strip(_SPACE)


def _reverse(s: object) -> str:
    _strings("reverse", s, [])
    assert isinstance(s, str)
    return s[::-1]


def _replace(s: object, old: object, new: object, *limit: object) -> str:
    _strings("replace", s, [old, new, *limit], ints=len(limit))
    assert isinstance(s, str) and isinstance(old, str) and isinstance(new, str)
    count = limit[0] if limit else -1
    assert isinstance(count, int)
    return s.replace(old, new, count if count >= 0 else -1)


def _split(s: object, separator: object, *limit: object) -> list[str]:
    _strings("split", s, [separator, *limit], ints=len(limit))
    assert isinstance(s, str) and isinstance(separator, str)
    count = limit[0] if limit else -1
    assert isinstance(count, int)
    if count == 0:
        return []
    if separator == "":  # each character (Go: each UTF-8 sequence), the last the rest
        if count < 0 or count >= len(s):
            return list(s)
        return [*s[: count - 1], s[count - 1 :]]
    return s.split(separator, count - 1 if count > 0 else -1)


def _substring(s: object, start: object, *end: object) -> str:
    _strings("substring", s, [start, *end], ints=1 + len(end))
    assert isinstance(s, str) and isinstance(start, int)
    if end:
        stop = end[0]
        assert isinstance(stop, int)
        if start > stop:
            raise EvaluationError(f"invalid substring range. start: {start}, end: {stop}")
        if not 0 <= start <= len(s):
            _out_of_range(start)
        if not 0 <= stop <= len(s):
            _out_of_range(stop)
        return s[start:stop]
    if not 0 <= start <= len(s):
        _out_of_range(start)
    return s[start:]


def _join(items: object, *separator: object) -> str:
    if not isinstance(items, list | tuple) or any(type(sep) is not str for sep in separator):
        _no_overload("join", items, separator)
    if any(type(item) is not str for item in items):
        raise EvaluationError("join: the list has an element that is not a string")
    sep = separator[0] if separator else ""
    assert isinstance(sep, str)
    return sep.join(items)


def _quote(s: object) -> str:
    if type(s) is not str:
        raise EvaluationError(f"no such overload: strings.quote({_type_name(s)})")
    assert isinstance(s, str)
    sane = _SURROGATE.sub("\ufffd", s)  # a lone surrogate (not a code point) becomes U+FFFD
    return '"' + sane.translate(_QUOTED) + '"'


# --------------------------------------------------------------------------- format

MAX_PRECISION: Final = 100
"""The largest precision ``format`` takes (``%.100f``): a larger one, read from a record,
could make a string of any size."""
_CLAUSE: Final = re.compile(r"%(?:\.([0-9]+))?([a-zA-Z%]?)")


def _format(template: object, args: object) -> str:
    """``template.format(args)``: cel-spec's ``format`` (its ``string_ext`` cases).

    ``%s`` any value (lists and maps as ``[a, b]`` and ``{k: v}``, keys in order of their
    text), ``%d`` an int, ``%f`` and ``%e`` a number (precision ``%.3f``, 6 by default),
    ``%x``/``%X`` an int or a string's UTF-8 bytes, ``%o`` an int, ``%b`` an int or a bool,
    ``%%`` a ``%``; a NaN or an infinity is ``NaN``, ``Infinity``, ``-Infinity``.
    """
    if type(template) is not str or not isinstance(args, list | tuple):
        _no_overload("format", template, [args])
    assert isinstance(template, str)
    out: list[str] = []
    pos = used = 0
    for match in _CLAUSE.finditer(template):
        out.append(template[pos : match.start()])
        pos = match.end()
        digits, verb = match.groups()
        if verb == "%" and digits is None:
            out.append("%")
            continue
        if verb not in _VERBS or (digits is not None and verb not in "fe"):
            shown = verb if digits is None else f".{digits}{verb}"
            raise EvaluationError(
                f'could not parse formatting clause: unrecognized formatting clause "{shown}"'
            )
        if used >= len(args):
            raise EvaluationError(f"index {used} out of range")
        value = args[used]
        used += 1
        precision = 6 if digits is None else int(digits)
        if precision > MAX_PRECISION:
            raise EvaluationError(f"format: a precision over {MAX_PRECISION}: {precision}")
        out.append(_clause(verb, value, precision))
    out.append(template[pos:])
    return "".join(out)


_VERBS: Final = frozenset("sdfexXob")
_NOT_FINITE: Final = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    return _NOT_FINITE.get(value)


def _clause(verb: str, value: object, precision: int) -> str:
    kind = type(value)
    if verb == "s":
        return _as_text(value)
    if verb in "fe":
        if kind is not int and kind is not float:
            what = "fixed-point" if verb == "f" else "scientific"
            _format_error(f"{what} clause can only be used on doubles", value)
        number = float(value)  # type: ignore[arg-type]
        special = _special(number)
        return special if special is not None else f"{number:.{precision}{verb}}"
    if verb == "d":
        if kind is float:
            assert isinstance(value, float)
            special = _special(value)
            if special is not None:
                return special
        if kind is not int:
            _format_error("decimal clause can only be used on integers", value)
        return str(value)
    if verb in "xX":
        if kind is str:
            assert isinstance(value, str)
            text = value.encode("utf-8", "surrogatepass").hex()
        elif kind is int:
            text = format(value, "x")
        else:
            _format_error("only integers, byte buffers, and strings can be formatted as hex", value)
        return text.upper() if verb == "X" else text
    if verb == "o":
        if kind is not int:
            _format_error("octal clause can only be used on integers", value)
        return format(value, "o")
    if kind is bool:  # b
        return "1" if value else "0"
    if kind is not int:
        _format_error("only integers and bools can be formatted as binary", value)
    return format(value, "b")


def _format_error(what: str, value: object) -> NoReturn:
    raise EvaluationError(f"error during formatting: {what}, was given {_type_name(value)}")


def _as_text(value: object) -> str:
    """``%s``: a value as text."""
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        return value
    if kind is float:
        assert isinstance(value, float)
        special = _special(value)
        return special if special is not None else _format_double(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_as_text(item) for item in value) + "]"
    if isinstance(value, dict):
        entries = sorted((_as_text(k), _as_text(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
    _format_error(  # pragma: no cover - records hold JSON values only
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists,"
        " types, durations, and timestamps",
        value,
    )


# --------------------------------------------------------------------------- math


def _as_double(value: int | float) -> float:
    return value if type(value) is float else float(value)


def _extreme(name: str, args: tuple[object, ...], greatest: bool) -> object:
    values: Sequence[object] = args
    if len(args) == 1 and isinstance(args[0], list | tuple):
        values = args[0]
        if not values:
            raise EvaluationError(f"{name}(list) argument must not be empty")
    result: object = None
    for value in values:
        if type(value) is not int and type(value) is not float:
            raise EvaluationError(f"no such overload: {name}({_type_name(value)})")
        assert isinstance(value, int | float)
        if math.isnan(value):
            raise EvaluationError(f"{name}: NaN values cannot be ordered")
        if result is None:
            result = value
            continue
        assert isinstance(result, int | float)
        # as cel-go: an int and a double compare as doubles; on a tie the first stays
        if type(result) is type(value):
            better = value > result if greatest else value < result
        else:
            a, b = _as_double(result), _as_double(value)
            better = b > a if greatest else b < a
        if better:
            result = value
    return result


def _greatest(*args: object) -> object:
    return _extreme("math.greatest", args, greatest=True)


def _least(*args: object) -> object:
    return _extreme("math.least", args, greatest=False)


EXTENSIONS: Final[dict[str, object]] = {
    "_x_charAt": _char_at,
    "_x_indexOf": _index_of,
    "_x_lastIndexOf": _last_index_of,
    "_x_lowerAscii": _lower_ascii,
    "_x_upperAscii": _upper_ascii,
    "_x_trim": _trim,
    "_x_reverse": _reverse,
    "_x_replace": _replace,
    "_x_split": _split,
    "_x_substring": _substring,
    "_x_join": _join,
    "_x_format": _format,
    "_x_math_greatest": _greatest,
    "_x_math_least": _least,
    "_x_strings_quote": _quote,
}
"""The helpers the generated code calls, by their name in its globals."""
