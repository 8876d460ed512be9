"""Typed batches: records checked against an input's schema in bulk, named one by one."""

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.graph.schema import FieldType, parse_schema
from operators.runtime import Columns
from service.store import ARROW, JSON, Batch
from service.store.typed import (
    SchemaMismatch,
    check_record,
    from_arrow,
    from_batch,
    from_values,
    ipc,
)

SCHEMA_JSON = {
    "key": "string",
    "n": "int64",
    "u": "uint64?",
    "x": "float64",
    "ok": "bool?",
    "tags": {"list": "string"},
    "at": {"object": {"lat": "float64", "lon": "float64?"}, "nullable": True},
}
PROBLEMS: list[tuple[str, str]] = []
SCHEMA = parse_schema(SCHEMA_JSON, "", PROBLEMS)
RECORD = FieldType("object", False, fields=SCHEMA.fields)
GOOD = {"key": "a", "n": 1, "u": 2, "x": 0.5, "ok": True, "tags": ["t"], "at": {"lat": 1.0}}


def body(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def test_the_schema_parses_without_problems_and_maps_to_an_arrow_struct() -> None:
    assert PROBLEMS == []
    assert SCHEMA.describe() == SCHEMA_JSON
    assert str(SCHEMA.arrow_type()) == (
        "struct<key: string not null, n: int64 not null, u: uint64, x: double not null, "
        "ok: bool, tags: list<item: string not null> not null, "
        "at: struct<lat: double not null, lon: double>>"
    )


def test_json_records_become_one_struct_array_per_batch_and_one_container_per_time() -> None:
    other = {"key": "b", "n": 2.0, "x": 3, "tags": [], "at": None}
    typed = from_values([4, 3, 4], [GOOD, other, GOOD], SCHEMA)
    assert typed.records.type == SCHEMA.arrow_type()
    assert (typed.least, typed.greatest, len(typed)) == (3, 4, 3)
    normal = {**GOOD, "at": {"lat": 1.0, "lon": None}}
    b = {"key": "b", "n": 2, "u": None, "x": 3.0, "ok": None, "tags": [], "at": None}
    assert [(t, c.rows()) for t, c in typed.by_time()] == [(3, [b]), (4, [normal, normal])]
    assert all(isinstance(c, Columns) for _, c in typed.by_time())


@pytest.mark.parametrize(
    ("record", "pointer", "detail"),
    [
        ({**GOOD, "n": "1"}, "/records/0/1/n", 'expected int64, got "1"'),
        ({**GOOD, "n": 1.5}, "/records/0/1/n", "expected int64, got 1.5"),
        (
            {**GOOD, "n": -(2**63) - 1},
            "/records/0/1/n",
            f"expected int64, got {-(2**63) - 1} (out of range)",
        ),
        ({**GOOD, "u": -1}, "/records/0/1/u", "expected uint64, got -1 (out of range)"),
        ({**GOOD, "x": True}, "/records/0/1/x", "expected float64, got true"),
        ({**GOOD, "ok": 1}, "/records/0/1/ok", "expected bool, got 1"),
        ({**GOOD, "tags": "ab"}, "/records/0/1/tags", 'expected a list, got "ab"'),
        ({**GOOD, "tags": [None]}, "/records/0/1/tags/0", "expected string, got null"),
        ({**GOOD, "at": {"lat": 1, "z": 2}}, "/records/0/1/at/z", "unexpected field"),
        ({**GOOD, "at": {}}, "/records/0/1/at/lat", "missing (expected float64)"),
        ({**GOOD, "a/b": 1}, "/records/0/1/a~1b", "unexpected field"),
        (None, "/records/0/1", "expected an object, got null"),
        ([1], "/records/0/1", "expected an object, got [1]"),
    ],
)
def test_a_record_that_does_not_fit_is_named_with_its_field(
    record: Any, pointer: str, detail: str
) -> None:
    with pytest.raises(SchemaMismatch) as refused:
        from_values([0], [record], SCHEMA)
    assert (refused.value.pointer, refused.value.detail) == (pointer, detail)


def test_uint64_beyond_int64_and_exact_ints_for_float64_take_the_exact_path() -> None:
    typed = from_values([0, 0], [{**GOOD, "u": 2**64 - 1}, {**GOOD, "x": 2**53 + 1}], SCHEMA)
    assert typed.records.field("u").to_pylist() == [2**64 - 1, 2]
    assert typed.records.field("x").to_pylist() == [0.5, float(2**53 + 1)]


def test_arrow_columns_are_cast_only_where_exact() -> None:
    columns = {
        "time": pa.array([1, 1], pa.int32()),
        "key": pa.array(["a", "b"], pa.large_string()),
        "n": pa.array([1, 2], pa.int8()),
        "x": pa.array([1, 2], pa.int64()),
        "tags": pa.array([["p"], []], pa.large_list(pa.string())),
    }
    typed = from_arrow(body(columns), SCHEMA)
    assert typed.records.type == SCHEMA.arrow_type()
    assert typed.records.to_pylist()[1] == {
        "key": "b",
        "n": 2,
        "u": None,
        "x": 2.0,
        "ok": None,
        "tags": [],
        "at": None,
    }
    refusals = [
        (
            {**columns, "n": pa.array([1.0, 2.5])},
            "n",
            "row 1: expected int64: Float value 2.500000 was truncated converting to int64",
        ),
        (
            {**columns, "x": pa.array([1, 2**53 + 1])},
            "x",
            "row 1: expected float64: Integer value 9007199254740993 not in range: "
            "-9007199254740992 to 9007199254740992",
        ),
        ({**columns, "n": pa.array(["1", "2"])}, "n", "expected int64, got a column of string"),
        (
            {**columns, "tags": pa.array([["p"], [None]])},
            "tags[]",
            "row 1: expected string, got null",
        ),
        ({**columns, "at": pa.array([{"lat": 1.0, "q": 1}, None])}, "at.q", "unexpected field"),
        (
            {**columns, "at": pa.array([None, {"lat": None}])},
            "at.lat",
            "row 1: null where the field is not nullable",
        ),
        (
            {**columns, "zz": pa.array([1, 2])},
            "zz",
            "unexpected column (not a field of the input's schema)",
        ),
        ({k: v for k, v in columns.items() if k != "n"}, "n", "missing column (expected int64)"),
    ]
    for bad, pointer, detail in refusals:
        with pytest.raises(SchemaMismatch) as refused:
            from_arrow(body(bad), SCHEMA)
        assert (refused.value.pointer, refused.value.detail) == (pointer, detail)


def test_a_typed_batch_is_logged_as_arrow_ipc_and_read_back_the_same() -> None:
    typed = from_values([2, 1], [GOOD, {**GOOD, "key": "z"}], SCHEMA)
    logged = typed.batch()
    assert logged.format == ARROW
    again = from_batch(Batch(ARROW, logged.data), SCHEMA)
    assert again.records.equals(typed.records) and again.times.equals(typed.times)
    assert ipc(typed.times, typed.records) == logged.data


def test_product_times_are_grouped_in_python_and_logged_as_json() -> None:
    from operators.progress import Product

    times = [Product(1, 0), Product(0, 1), Product(1, 0)]
    typed = from_values(times, [GOOD, {**GOOD, "n": 5}, {**GOOD, "n": 6}], SCHEMA)
    assert not typed.integer_times
    groups = [(t, [r["n"] for r in c.rows()]) for t, c in typed.by_time()]
    assert groups == [(Product(0, 1), [5]), (Product(1, 0), [1, 6])]
    logged = typed.batch()
    assert logged.format == JSON
    again = from_batch(Batch(JSON, logged.data), SCHEMA)
    assert again.times == times and again.records.equals(typed.records)


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 2.0**63, 2.0**64, -(2.0**63)]),
    st.text(max_size=3),
    st.lists(st.one_of(st.none(), st.text(max_size=2), st.integers(-3, 3)), max_size=3),
    st.fixed_dictionaries(
        {}, optional={"lat": st.floats(-2, 2), "lon": st.none(), "q": st.just(1)}
    ),
)
FIELDS = st.sampled_from([f.name for f in SCHEMA.fields] + ["extra"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(FIELDS, VALUES), min_size=1, max_size=6), st.data())
def test_the_bulk_check_accepts_exactly_what_the_record_by_record_check_does(
    records: list[dict[str, Any]], data: st.DataObject
) -> None:
    # Mostly valid records, with what hypothesis made in some fields.
    records = [{**GOOD, **r} if data.draw(st.booleans()) else r for r in records]
    try:
        expected = [check_record(r, RECORD, f"/records/{i}/1") for i, r in enumerate(records)]
    except SchemaMismatch as first:
        with pytest.raises(SchemaMismatch) as refused:
            from_values([0] * len(records), records, SCHEMA)
        assert (refused.value.pointer, refused.value.detail) == (first.pointer, first.detail)
        return
    typed = from_values([0] * len(records), records, SCHEMA)
    assert typed.records.type == SCHEMA.arrow_type()
    assert typed.records.to_pylist() == [
        {f.name: _full(e, f.name) for f in SCHEMA.fields} for e in expected
    ]


def _full(record: dict[str, Any], name: str) -> Any:
    value = record.get(name)
    if name == "at" and value is not None:
        return {"lat": value["lat"], "lon": value.get("lon")}
    return value
