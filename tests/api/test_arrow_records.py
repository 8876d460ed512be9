"""ArrowRecords: a staged Arrow body as columns, checked in bulk, grouped by time at commit."""

from typing import Any

import pyarrow as pa
import pyarrow.ipc
import pytest

from api.server.arrow import ArrowRecords, columns_from_arrow
from service.app import BadRequest


def body(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=2):  # several batches, as Spark's bodies
            writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def test_rows_are_grouped_by_time_ascending_in_staging_order() -> None:
    times = [5, 0, 5, 2**64 - 1, 0, 2, 5]
    staged = columns_from_arrow(
        body({"time": pa.array(times, pa.uint64()), "i": list(range(len(times)))})
    )
    assert (len(staged), staged.least, staged.greatest) == (7, 0, 2**64 - 1)
    assert staged.by_time() == [
        (0, [{"i": 1}, {"i": 4}]),
        (2, [{"i": 5}]),
        (5, [{"i": 0}, {"i": 2}, {"i": 6}]),
        (2**64 - 1, [{"i": 3}]),
    ]
    assert staged.pairs() == [(t, {"i": i}) for i, t in enumerate(times)]
    assert (staged.first_before(5), staged.first_before(1), staged.time_at(3)) == (1, 1, 2**64 - 1)


def test_one_time_is_one_group_and_json_text_keeps_its_values() -> None:
    staged = columns_from_arrow(
        body({"time": pa.array([3, 3, 3], pa.int8()), "record": ['{"a": 1}', "null", "[2]"]})
    )
    assert staged.by_time() == [(3, [{"a": 1}, None, [2]])]
    mixed = columns_from_arrow(body({"time": [1, 0], "record": ['"x"', '"y"']}))
    assert mixed.by_time() == [(0, ["y"]), (1, ["x"])]


def test_only_times_make_empty_objects_and_no_rows_make_no_groups() -> None:
    assert columns_from_arrow(body({"time": [1, 0, 1]})).by_time() == [(0, [{}]), (1, [{}, {}])]
    nothing = {"time": pa.array([], pa.int64()), "k": pa.array([], pa.string())}
    empty = columns_from_arrow(body(nothing))
    assert (len(empty), empty.by_time(), empty.pairs()) == (0, [], [])


@pytest.mark.parametrize("width", [1, 2, 64, 65])
def test_rows_of_any_width_become_objects_of_their_columns(width: int) -> None:
    columns: dict[str, Any] = {"time": [1, 0]}
    columns.update({f"c{i}": [i, -i] for i in range(width)})
    staged = columns_from_arrow(body(columns))
    assert staged.by_time() == [
        (0, [{f"c{i}": -i for i in range(width)}]),
        (1, [{f"c{i}": i for i in range(width)}]),
    ]


def test_nested_and_dictionary_columns_have_a_json_form() -> None:
    staged = columns_from_arrow(
        body(
            {
                "time": [0],
                "tags": pa.array([["a", "b"]]),
                "point": pa.array([{"x": 1, "y": 2.5}]),
                "kind": pa.array(["k"]).dictionary_encode(),
            }
        )
    )
    row = {"tags": ["a", "b"], "point": {"x": 1, "y": 2.5}, "kind": "k"}
    assert staged.by_time() == [(0, [row])]


def test_a_time_column_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(BadRequest) as caught:
        columns_from_arrow(body({"time": pa.array([1.5])}))
    assert caught.value.detail == "the 'time' column must hold integers, not double"
    assert isinstance(columns_from_arrow(body({"time": [0]})), ArrowRecords)
