"""The cel-spec conformance cases (``test_cel_conformance.py``'s) on the vector backend.

Every in-scope case runs on the vector backend: its variables (bindings, as Arrow columns of
the bindings' types) and its constants as a batch of 1 row, then of 3, and gives on every row
the same value (with its CEL type: an ``int`` in an ``int64`` column, a ``uint`` in
``uint64``) or error as the row backend, which ``test_cel_conformance.py`` holds to the
case's expectation. A case the checker refuses at submission is refused for both backends
alike. A case marked ``disable_check`` is compiled unchecked, as ``test_cel_conformance.py``
does: the vector backend runs it if the checker takes it (then it is the same program), and
lists it (``compiled unchecked (check=False) and refused by the checker``) if not. The cases
that cannot run on the vector backend are listed, with the reason, in
``cel_conformance/vector.txt``: their expression has no vector form (the reason is
:class:`NotVectorized`'s) or a binding has no Arrow column. A listed case that runs, or runs
for another reason, fails the test, as does an unlisted case that does not run or differs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from operators.graph import EvaluationError, ExpressionError, compile_expression
from operators.graph.cel.vector import NotVectorized, compile_vector
from tests.unit.graph.test_cel_conformance import (
    CASES,
    Case,
    Expected,
    expected_value,
    python_value,
    skip_reason,
)

LISTED_FILE = Path(__file__).resolve().parent / "cel_conformance" / "vector.txt"


def read_listed() -> dict[str, str]:
    """The cases listed as not running on the vector backend: ``id<TAB>reason`` lines."""
    listed = {}
    for line in LISTED_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            case_id, reason = line.split("\t")
            listed[case_id] = reason
    return listed


LISTED = read_listed()
IN_SCOPE = [case for case in CASES if skip_reason(case) is None]


class Unrepresentable(Exception):
    """A binding's value has no Arrow column (a list of mixed types, a map with other keys)."""


def arrow_type(expected: Expected) -> pa.DataType:
    """The Arrow type of a column holding the binding ``expected``."""
    simple = {
        "null_type": pa.null(),
        "bool": pa.bool_(),
        "int": pa.int64(),
        "uint": pa.uint64(),
        "double": pa.float64(),
        "string": pa.string(),
    }
    if expected.type in simple:
        return simple[expected.type]
    if expected.type == "list":
        types = {arrow_type(item) for item in expected.value}
        if len(types) > 1:
            raise Unrepresentable("a list of values of several types")
        return pa.list_(types.pop() if types else pa.null())
    fields = []
    for key, value in expected.value:
        if key.type != "string":
            raise Unrepresentable(f"a map with {key.type} keys")
        fields.append(pa.field(key.value, arrow_type(value)))
    return pa.struct(fields)


def bindings_of(case: Case) -> tuple[list[str], list[Any], dict[str, pa.DataType]]:
    """The case's variables (as ``test_cel_conformance.run`` names them), their values and
    the Arrow types of their columns."""
    typed = {
        binding["key"][0].decode(): expected_value(binding["value"][0]["value"][0])
        for binding in case.test.get("bindings", [])
    }
    declared = [d["name"][0].decode() for d in case.test.get("type_env", []) if "ident" in d]
    names = list(dict.fromkeys([*typed, *declared]))
    null = Expected("null_type", None)
    values = [python_value(typed.get(name, null)) for name in names]
    types = {name: arrow_type(typed.get(name, null)) for name in names}
    return names, values, types


def same(actual: Any, expected: Any) -> bool:
    """Equal values of the same Python types, NaN equal to NaN, -0.0 apart from 0.0."""
    if type(actual) is not type(expected):
        return False
    if isinstance(actual, float):
        if math.isnan(expected):
            return math.isnan(actual)
        return actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    if isinstance(actual, list):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k]) for k in actual
        )
    return bool(actual == expected)


CEL_TYPES = {pa.int64(): "int", pa.uint64(): "uint", pa.float64(): "double"}


def vector_outcome(case: Case) -> str | None:
    """``None`` if the case runs on the vector backend with the row backend's outcome on every
    row; else why it does not run (or how it differs)."""
    try:
        names, values, types = bindings_of(case)
    except Unrepresentable as error:
        return f"a binding Arrow has no column for: {error}"
    try:
        expression = compile_expression(case.expr, names, check=not case.unchecked)
    except (ExpressionError, ValueError):
        return None  # refused at submission: by the compiler both backends share
    vector = compile_vector(expression, types)
    if isinstance(vector, NotVectorized):
        return str(vector)
    try:
        row: tuple[str, Any] = ("value", expression.fn(*values))
    except EvaluationError:
        row = ("error", None)
    for length in (1, 3):
        columns = [
            pa.array([value] * length, types[name])
            for name, value in zip(names, values, strict=True)
        ]
        result, failed = vector.evaluate(*columns, length=length)
        for i in range(length):
            got = ("error", None) if failed is not None and failed[i].as_py() else None
            got = got or ("value", result[i].as_py())
            if got[0] != row[0] or (got[0] == "value" and not same(got[1], row[1])):
                return f"differs: {got} on the vector backend, {row} on the row backend"
        if (
            row[0] == "error"
            and vector.messages(columns, list(range(length)))
            != [_message(expression, values)] * length
        ):
            return "differs: the messages"
    wanted = _expected_type(case)
    if row[0] == "value" and wanted is not None and CEL_TYPES.get(vector.type, wanted) != wanted:
        return f"differs: a {wanted} expected, an Arrow {vector.type} given"
    return None


def _message(expression: Any, values: list[Any]) -> str:
    try:
        expression.fn(*values)
    except EvaluationError as error:
        return str(error)
    raise AssertionError("no error")


def _expected_type(case: Case) -> str | None:
    if "eval_error" in case.test or "any_eval_errors" in case.test:
        return None
    return expected_value(case.field("value", {"bool_value": [True]})).type


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in IN_SCOPE])
def test_conformance_case_on_the_vector_backend(case: Case) -> None:
    assert vector_outcome(case) == LISTED.get(case.id)


def test_every_listed_case_is_in_scope_and_the_list_is_in_order() -> None:
    ids = [case.id for case in IN_SCOPE]
    assert set(LISTED) <= set(ids)
    # (a case's id may be twice in a file: listed once)
    assert list(LISTED) == [case_id for case_id in dict.fromkeys(ids) if case_id in LISTED]
    assert all(not reason.startswith("differs") for reason in LISTED.values())
