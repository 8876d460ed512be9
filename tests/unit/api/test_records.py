"""Record limits on a staged Arrow body of typed columns: the schema says how deep rows are."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pytest

from api.server.arrow import columns_from_arrow
from api.server.records import check_columns, record_depth
from service.app import Invalid, Limits


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
