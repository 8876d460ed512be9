"""The CEL specification's conformance cases (cel-spec's ``tests/simple/testdata``) against
``compile_expression``, for every feature docs/graphs.md claims.

The data is cel-spec's, unchanged, in ``cel_conformance/testdata`` (Apache 2.0: its LICENSE
beside it; the commit it was taken from in ``cel_conformance/README.md``). Each case is:

* skipped, with its reason, if its file or the case needs what docs/graphs.md says is not
  supported (protobuf messages, bytes, timestamps and durations, type values, optionals,
  extensions but the strings extension without ``format`` and ``math.greatest``/``least``,
  unknowns, containers and qualified names, the checker's deduced types);
* else in scope: it compiles the expression with the case's bindings as variables and
  evaluates it, and passes when the value is the expected one (with its CEL type: ``1``, ``1u``,
  ``1.0`` and ``true`` differ) or an expected error is raised (at evaluation, or at submission
  when the checker sees it). A case marked ``disable_check`` is compiled unchecked
  (``compile_expression(..., check=False)``, cel-go's ``disable_check``), every other checked,
  as the service always does.

Every in-scope case passes. :data:`COUNTS` holds passed / in scope / skipped per file;
docs/graphs.md shows the same table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from operators.graph import EvaluationError, ExpressionError, compile_expression

HERE = Path(__file__).resolve().parent
DATA = HERE / "cel_conformance" / "testdata"
DOCS = HERE.parents[2] / "docs" / "graphs.md"

# --------------------------------------------------------------------------- a textproto parser

_TOKEN = re.compile(
    r"""\s+|\#[^\n]*
    |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<ident>\[[A-Za-z][^\]]*\]|[A-Za-z_][A-Za-z0-9_.]*)
    |(?P<number>[-+]?(?:inf|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[fFuU]?))
    |(?P<punct>[{}<>:\[\],;])""",
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}  # fmt: skip


def _unescape(text: str) -> bytes:
    """A textproto string literal's bytes (C escapes; octal and hex escapes are bytes)."""
    out, i = bytearray(), 1
    while i < len(text) - 1:
        c = text[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        kind = text[i + 1]
        if kind in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[kind]
            i += 2
        elif kind in "xX":
            digits = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2 :])
            assert digits is not None
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif kind in "uU":
            n = 4 if kind == "u" else 8
            out += chr(int(text[i + 2 : i + 2 + n], 16)).encode("utf-8", "surrogatepass")
            i += 2 + n
        else:
            digits = re.match(r"[0-7]{1,3}", text[i + 1 :])
            assert digits is not None, text
            out.append(int(digits.group(), 8))
            i += 1 + len(digits.group())
    return bytes(out)


Message = dict[str, list[Any]]


def _tokens(source: str) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        assert match is not None, source[pos : pos + 40]
        pos = match.end()
        if match.lastgroup is not None:
            yield match.lastgroup, match.group()


def parse_textproto(source: str) -> Message:
    """A text-format message as ``{field: [values]}``: nested messages are dicts, strings bytes,
    numbers ints or floats, enums and bools their names."""
    tokens = list(_tokens(source))
    message, end = _message(tokens, 0, None)
    assert end == len(tokens)
    return message


def _message(tokens: list[tuple[str, str]], i: int, close: str | None) -> tuple[Message, int]:
    message: Message = {}
    while i < len(tokens) and tokens[i][1] != close:
        kind, name = tokens[i]
        assert kind == "ident", tokens[i]
        i += 1
        if tokens[i][1] == ":":
            i += 1
        values: list[Any] = []
        if tokens[i][1] == "[":  # a list of values
            i += 1
            while tokens[i][1] != "]":
                value, i = _value(tokens, i)
                values.append(value)
                if tokens[i][1] == ",":
                    i += 1
            i += 1
        else:
            value, i = _value(tokens, i)
            values.append(value)
        message.setdefault(name, []).extend(values)
        if i < len(tokens) and tokens[i][1] in (",", ";"):
            i += 1
    return message, i + (close is not None)


def _value(tokens: list[tuple[str, str]], i: int) -> tuple[Any, int]:
    kind, text = tokens[i]
    if text in ("{", "<"):
        return _message(tokens, i + 1, "}" if text == "{" else ">")
    if kind == "string":
        data = _unescape(text)
        while i + 1 < len(tokens) and tokens[i + 1][0] == "string":  # adjacent strings join
            i += 1
            data += _unescape(tokens[i][1])
        return data, i + 1
    if kind == "number":
        number = text.rstrip("fFuU") if not text.lower().endswith(("inf", "nan")) else text
        if re.fullmatch(r"[-+]?[0-9]+", number):
            return int(number), i + 1
        return float(number), i + 1
    return text, i + 1


# --------------------------------------------------------------------------- the cases

IN_SCOPE_FILES = {
    "basic", "comparisons", "conversions", "fp_math", "integer_math", "lists", "logic",
    "macros", "macros2", "parse", "plumbing", "string", "fields", "dynamic", "string_ext",
    "math_ext",
}  # fmt: skip
"""The files about what docs/graphs.md claims; the others are about what it says is not
supported: protobuf messages (proto2, proto3, wrappers, enums), extensions (bindings, block,
encoders, network), optionals, timestamps and durations, unknowns, namespaces and the
checker's deduced types. Of the strings and math extensions, the sections of what is not
supported are skipped (:data:`UNSUPPORTED_SECTIONS`)."""

UNSUPPORTED_SECTIONS = {
    **{
        f"math_ext/{section}": "the math extension beyond math.greatest and math.least"
        for section in (
            "ceil", "floor", "round", "trunc", "abs", "sign", "isNaN", "isInf", "isFinite",
            "bit_and", "bit_or", "bit_xor", "bit_not", "bit_shift_left", "bit_shift_right",
        )
    },
}  # fmt: skip
"""Sections of in-scope files about what is not supported, and why."""

UNSUPPORTED_CASES = {
    "string_ext/format/map support (all key types)": (
        "a map with the keys 1 and true (Python's dicts do not tell them apart)"
    ),
}
"""Single cases about what is not supported (docs/graphs.md), and why."""

_UNSUPPORTED_SYNTAX: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![\w.])[bB][rR]?['\"]|(?<![\w.])[rR][bB]['\"]|\bbytes\("), "bytes"),
    (re.compile(r"\btype\(|\b(?:null_type|type)\b"), "type values"),
    (re.compile(r"\b(?:timestamp|duration)\("), "timestamps and durations"),
    (re.compile(r"\bgoogle\.|\bcel\.expr|\bTestAllTypes\b|[A-Z]\w*\s*\{"), "protobuf messages"),
    (re.compile(r"\.\?|\?\.|\boptional\."), "optionals"),
    # A dot that starts a name: at the start, or after a space, an opening bracket, a comma
    # or an operator (not after a literal, a closing bracket or a name: a selection).
    (re.compile(r"(?:^|[\s(\[{,!\-+*/%<>=&|?:])\.\s*[A-Za-z_]"), "leading-dot names"),
    (
        re.compile(r"\.(?:all|exists|existsOne|exists_one|transform\w+)\(\s*\w+\s*,\s*\w+\s*,"),
        "two-variable comprehensions (an extension)",
    ),
]
_UNSUPPORTED_VALUES = {
    "bytes_value": "bytes",
    "object_value": "protobuf messages",
    "type_value": "type values",
    "enum_value": "enums",
}


@dataclass(frozen=True)
class Case:
    file: str
    section: str
    name: str
    test: Message

    @property
    def id(self) -> str:
        return f"{self.file}/{self.section}/{self.name}"

    def field(self, name: str, default: Any = None) -> Any:
        return self.test.get(name, [default])[0]

    @property
    def expr(self) -> str:
        return bytes(self.field("expr", b"")).decode()

    @property
    def unchecked(self) -> bool:
        """Whether the case is run without the type checker (``disable_check: true``)."""
        return self.field("disable_check") in ("true", "True", "t", 1)


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(DATA.glob("*.textproto")):
        data = parse_textproto(path.read_text(encoding="utf-8"))
        for section in data.get("section", []):
            section_name = section["name"][0].decode()
            cases += [
                Case(path.stem, section_name, test["name"][0].decode(), test)
                for test in section.get("test", [])
            ]
    return cases


def _values_in(value: Any) -> Iterator[str]:
    """The field names of every Value nested in ``value``."""
    if isinstance(value, dict):
        for key, items in value.items():
            yield key
            for item in items:
                yield from _values_in(item)


def skip_reason(case: Case) -> str | None:
    """Why a case is out of scope (what docs/graphs.md says is not supported), or None."""
    if case.file not in IN_SCOPE_FILES:
        return f"{case.file}: not supported"
    section = UNSUPPORTED_SECTIONS.get(f"{case.file}/{case.section}")
    if section is not None:
        return section
    if case.id in UNSUPPORTED_CASES:
        return UNSUPPORTED_CASES[case.id]
    if case.field("check_only") or "deduced_type" in case.test or "typed_result" in case.test:
        return "the checker's deduced types"
    if "unknown" in case.test or "any_unknowns" in case.test:
        return "unknowns"
    if "container" in case.test:
        return "containers and qualified names"
    if case.field("disable_macros"):
        return "macros disabled"
    if any(b"." in decl["name"][0] for decl in case.test.get("type_env", [])):
        return "containers and qualified names"
    for pattern, reason in _UNSUPPORTED_SYNTAX:
        if pattern.search(case.expr):
            return reason
    for name in _values_in({key: case.test.get(key, []) for key in ("value", "bindings")}):
        if name in _UNSUPPORTED_VALUES:
            return _UNSUPPORTED_VALUES[name]
    return None


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Expected:
    """An expected value with its CEL type (Python's values lose ``uint`` and ``int``/``bool``)."""

    type: str
    value: Any


def expected_value(value: Message) -> Expected:
    (kind, (item,)), *_ = value.items()
    if kind == "null_value":
        return Expected("null_type", None)
    if kind == "bool_value":
        return Expected("bool", item == "true" or item is True)
    if kind == "int64_value":
        return Expected("int", int(item))
    if kind == "uint64_value":
        return Expected("uint", int(item))
    if kind == "double_value":
        return Expected("double", float(item))
    if kind == "string_value":
        return Expected("string", item.decode("utf-8", "surrogatepass"))
    if kind == "list_value":
        return Expected("list", [expected_value(v) for v in item.get("values", [])])
    if kind == "map_value":
        entries = item.get("entries", [])
        return Expected(
            "map", [(expected_value(e["key"][0]), expected_value(e["value"][0])) for e in entries]
        )
    raise AssertionError(f"unexpected value kind {kind}")


def python_value(expected: Expected) -> Any:
    """A binding's value as a record's would be."""
    if expected.type == "list":
        return [python_value(item) for item in expected.value]
    if expected.type == "map":
        return {python_value(k): python_value(v) for k, v in expected.value}
    return expected.value


_PYTHON_TYPES = {
    "null_type": (type(None),),
    "bool": (bool,),
    "int": (int,),
    "uint": (int,),
    "double": (float,),
    "string": (str,),
    "list": (list, tuple),
    "map": (dict,),
}


def matches(actual: Any, expected: Expected) -> bool:
    if type(actual) not in _PYTHON_TYPES[expected.type]:
        return False
    if expected.type == "double":
        if math.isnan(expected.value):
            return math.isnan(actual)
        return bool(actual == expected.value) and math.copysign(1, actual) == math.copysign(
            1, expected.value
        )
    if expected.type == "list":
        return len(actual) == len(expected.value) and all(
            matches(a, e) for a, e in zip(actual, expected.value, strict=True)
        )
    if expected.type == "map":
        if len(actual) != len(expected.value):
            return False
        for key, value in expected.value:
            found = [k for k in actual if matches(k, key)]
            if len(found) != 1 or not matches(actual[found[0]], value):
                return False
        return True
    return bool(actual == expected.value)


def run(case: Case) -> str | None:
    """Run an in-scope case: None if it passes, else what went wrong."""
    bindings = {
        binding["key"][0].decode(): python_value(expected_value(binding["value"][0]["value"][0]))
        for binding in case.test.get("bindings", [])
    }
    declared = [
        decl["name"][0].decode() for decl in case.test.get("type_env", []) if "ident" in decl
    ]
    names = list(dict.fromkeys([*bindings, *declared]))
    wants_error = "eval_error" in case.test or "any_eval_errors" in case.test
    try:
        expression = compile_expression(case.expr, names, check=not case.unchecked)
    except ExpressionError as error:
        return None if wants_error else f"refused at submission: {error}"
    except ValueError as error:  # a variable name we do not take
        return f"variables refused: {error}"
    try:
        actual = expression.fn(*(bindings.get(name) for name in names))
    except EvaluationError as error:
        return None if wants_error else f"evaluation error: {error}"
    if wants_error:
        return f"no error: {actual!r}"
    expected = expected_value(case.field("value", {"bool_value": [True]}))
    if not matches(actual, expected):
        return f"got {actual!r}, expected {expected.type} {expected.value!r}"
    static = expression.result_type
    if expected.type in ("int", "uint") and static in ("int", "uint") and static != expected.type:
        return f"static type {expression.result_type}, expected {expected.type}"
    return None


CASES = load_cases()


COUNTS: dict[str, tuple[int, int, int]] = {
    "basic": (40, 40, 3),
    "bindings_ext": (0, 0, 8),
    "block_ext": (0, 0, 37),
    "comparisons": (305, 305, 101),
    "conversions": (69, 69, 40),
    "dynamic": (0, 0, 226),
    "encoders_ext": (0, 0, 4),
    "enums": (0, 0, 85),
    "fields": (45, 45, 15),
    "fp_math": (30, 30, 0),
    "integer_math": (64, 64, 0),
    "lists": (39, 39, 0),
    "logic": (30, 30, 0),
    "macros": (44, 44, 0),
    "macros2": (0, 0, 46),
    "math_ext": (122, 122, 77),
    "namespace": (0, 0, 14),
    "network_ext": (0, 0, 69),
    "optionals": (0, 0, 70),
    "parse": (129, 129, 90),
    "plumbing": (5, 5, 0),
    "proto2": (0, 0, 118),
    "proto2_ext": (0, 0, 18),
    "proto3": (0, 0, 85),
    "string": (45, 45, 6),
    "string_ext": (193, 193, 23),
    "timestamps": (0, 0, 78),
    "type_deduction": (0, 0, 47),
    "wrappers": (0, 0, 36),
}
"""Per file: passed, in scope, skipped."""


def counts() -> dict[str, tuple[int, int, int]]:
    result: dict[str, list[int]] = {}
    for case in CASES:
        row = result.setdefault(case.file, [0, 0, 0])
        if skip_reason(case) is not None:
            row[2] += 1
            continue
        row[1] += 1
        row[0] += run(case) is None
    return {name: (p, n, k) for name, (p, n, k) in result.items()}


def _param(case: Case) -> Any:
    reason = skip_reason(case)
    if reason is not None:
        return pytest.param(case, id=case.id, marks=pytest.mark.skip(reason=reason))
    return pytest.param(case, id=case.id)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_conformance_case(case: Case) -> None:
    assert run(case) is None


def test_every_file_is_read_and_the_counts_are_the_documented_ones() -> None:
    assert len(list(DATA.glob("*.textproto"))) == 30
    assert counts() == COUNTS
    docs = DOCS.read_text(encoding="utf-8")
    for name, (passed, in_scope, skipped) in COUNTS.items():
        assert f"| `{name}` | {passed} | {in_scope} | {skipped} |" in docs, name


def test_every_in_scope_case_passes() -> None:
    assert all(passed == in_scope for passed, in_scope, _ in COUNTS.values())


def test_the_unchecked_cases_are_read() -> None:
    unchecked = {case.id for case in CASES if case.unchecked and skip_reason(case) is None}
    assert "basic/variables/unbound_is_runtime_error" in unchecked
    assert "logic/AND/short_circuit_type_left" in unchecked
    assert "basic/reserved_const/true" not in unchecked
    assert all(case.field("disable_check") == "true" for case in CASES if case.unchecked)


def test_the_textproto_parser() -> None:
    parsed = parse_textproto('a: 1 b { c: "x\\101" "y" } b < d: -2.5 > e: [1, 2] # comment')
    assert parsed == {"a": [1], "b": [{"c": [b"xAy"]}, {"d": [-2.5]}], "e": [1, 2]}
