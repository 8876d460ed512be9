"""Record limits on a staged Arrow body of typed columns: the schema says how deep rows are."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.server.arrow import columns_from_arrow
from api.server.records import (
    check_columns,
    check_records,
    check_typed,
    record_depth,
    row_pointer,
)
from operators.graph.schema import parse_schema
from service.app import Invalid, Limits
from service.store.typed import from_arrow


def body(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def test_typed_columns_nest_as_deeply_as_their_types() -> None:
    three = pa.list_(pa.list_(pa.list_(pa.int64())))  # a row {"v": [[[1]]]} nests 4 deep
    data = body({"time": pa.array([0, 0], pa.int64()), "v": pa.array([[[[1]]], [[[2]]]], three)})
    columns = columns_from_arrow(data)
    assert columns.row_depth() == 4 == record_depth({"v": [[[1]]]})
    check_columns(columns, len(data), Limits(max_record_depth=4))
    with pytest.raises(Invalid) as refused:
        check_columns(columns, len(data), Limits(max_record_depth=3))
    assert refused.value.detail == (
        "record 0 nests 4 levels deep, beyond max_record_depth (3): the columns' types nest "
        "that deep"
    )


def test_typed_columns_are_sized_only_when_the_body_could_hold_a_large_record() -> None:
    data = body({"time": pa.array([0, 0], pa.int64()), "s": pa.array(["x" * 50, "y" * 500])})
    columns = columns_from_arrow(data)
    check_columns(columns, len(data), Limits(max_record_bytes=len(data)))
    with pytest.raises(Invalid) as refused:
        check_columns(columns, len(data), Limits(max_record_bytes=100))
    assert refused.value.detail == "record 1 is 508 bytes, over max_record_bytes (100)"
    assert refused.value.problems == [{"pointer": "row 1", "detail": "over max_record_bytes"}]


# --------------------------------------------------------------------------- typed Arrow

TYPED = parse_schema(
    {"s": "string?", "n": "int64", "u": "uint64", "f": "float64", "b": "bool", "t": "string"},
    "",
    [],
)
ROW = st.fixed_dictionaries(
    {
        "s": st.none() | st.text(max_size=40),
        "n": st.integers(-(2**63), 2**63 - 1),
        "u": st.integers(0, 2**64 - 1),
        "f": st.floats(allow_nan=False, allow_infinity=False),
        "b": st.booleans(),
        "t": st.text(alphabet=st.sampled_from('a\x01"\\\n\u00e9\u20ac'), max_size=60),
    }
)


def typed_body(rows: list[dict[str, Any]]) -> bytes:
    columns = {"time": pa.array([0] * len(rows), pa.int64())}
    for field in TYPED.arrow_schema():
        columns[field.name] = pa.array([r[field.name] for r in rows], field.type)
    return body(columns)


def refusal(check: Any) -> tuple[str, Any] | None:
    try:
        check()
    except Invalid as refused:
        return refused.detail, refused.problems
    return None


@settings(max_examples=200, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=8), st.integers(60, 400))
def test_typed_arrow_records_are_sized_as_their_json_is(
    rows: list[dict[str, Any]], most: int
) -> None:
    """check_typed refuses exactly what check_records refuses, naming the same record."""
    data = typed_body(rows)
    typed = from_arrow(data, TYPED)
    records = typed.records.to_pylist()
    assert records == rows
    limits = Limits(max_record_bytes=most)
    expected = refusal(lambda: check_records(records, 2**40, limits))
    assert refusal(lambda: check_typed(typed, len(data), limits)) == expected


def test_a_typed_arrow_record_is_named_by_its_json_size_not_its_arrow_size() -> None:
    rows = [
        {"s": None, "n": 1, "u": 2, "f": 0.5, "b": True, "t": "a"},
        {"s": "\x01" * 30, "n": -1, "u": 0, "f": 1e300, "b": False, "t": ""},
    ]
    data = typed_body(rows)
    typed = from_arrow(data, TYPED)
    # Row 1: {"s":"\u0001...","n":-1,"u":0,"f":1e+300,"b":false,"t":""}: 30 Arrow bytes of
    # string, 180 of JSON (each \u0001), and 49 more: 229.
    assert len(orjson.dumps(rows[1])) == 229
    check_typed(typed, len(data), Limits(max_record_bytes=229))
    with pytest.raises(Invalid) as refused:
        check_typed(typed, len(data), Limits(max_record_bytes=228), row_pointer)
    assert refused.value.detail == "record 1 is 229 bytes, over max_record_bytes (228)"
    assert refused.value.problems == [{"pointer": "row 1", "detail": "over max_record_bytes"}]


def test_a_typed_arrow_record_nests_as_deeply_as_its_schema() -> None:
    schema = parse_schema({"tags": {"list": "string"}}, "", [])  # {"tags": [...]}: 2 deep
    data = body(
        {"time": pa.array([0], pa.int64()), "tags": pa.array([["a"]], pa.list_(pa.string()))}
    )
    typed = from_arrow(data, schema)
    check_typed(typed, len(data), Limits(max_record_depth=2))
    with pytest.raises(Invalid) as refused:
        check_typed(typed, len(data), Limits(max_record_depth=1))
    assert refused.value.detail == (
        "record 0 nests 2 levels deep, beyond max_record_depth (1): the input's schema nests "
        "that deep"
    )
    assert refused.value.problems == [
        {"pointer": "/records/0/1", "detail": "beyond max_record_depth"}
    ]
