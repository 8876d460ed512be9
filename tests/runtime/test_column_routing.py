"""Exchange by key columns: a batch of columns goes where its rows would go, record by record.

``route_columns`` splits :class:`Columns` with vectorized kernels; ``route`` splits a list
with ``stable_hash`` of each record's key. Both kinds can share an exchange edge, so for any
keys (nulls, negative ints, uint64 above 2**63, whole and fractional floats, NaN and the
infinities, bools, strings, bytes, several columns at once) the parts must be the same.
"""

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.runtime import Columns, stable_hash
from operators.runtime.channels import route
from operators.runtime.routing import column_hash, field_key, route_columns
from tests.runtime.fabrics import Clusters, Layout, layouts

INT64 = st.integers(-(2**63), 2**63 - 1)
KINDS: dict[str, tuple[pa.DataType, Any]] = {
    "int64": (pa.int64(), INT64),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "uint64 above 2**63": (pa.uint64(), st.integers(2**63, 2**64 - 1)),
    "float64": (
        pa.float64(),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(2**70), 2**70).map(float),  # whole numbers, in range and not
        ),
    ),
    "float32": (pa.float32(), st.floats(width=32)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=5)),
    "binary": (pa.binary(), st.binary(max_size=5)),
}


@st.composite
def key_columns(draw: Any) -> tuple[list[str], pa.RecordBatch]:
    """A record batch of 1 to 40 rows with 1 to 3 key fields of random kinds, some null."""
    rows = draw(st.integers(1, 40))
    names = [f"k{i}" for i in range(draw(st.integers(1, 3)))]
    columns: dict[str, pa.Array] = {}
    for name in names:
        kind, values = KINDS[draw(st.sampled_from(sorted(KINDS)))]
        # Few distinct values, so keys repeat, as they do in real batches.
        pool = draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=6))
        picks = draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows))
        columns[name] = pa.array(picks, kind)
    columns["value"] = pa.array(range(rows), pa.int64())
    return names, pa.record_batch(columns)


def _rows(parts: list[Columns | None]) -> list[list[Any]]:
    return [[] if part is None else part.rows() for part in parts]


@settings(max_examples=400, deadline=None)
@given(key_columns(), st.integers(1, 5), st.data())
def test_routing_columns_and_routing_their_rows_give_the_same_parts(
    batch: tuple[list[str], pa.RecordBatch], peers: int, data: st.DataObject
) -> None:
    names, records = batch
    # A slice, too: an array that does not start at its buffers' first value.
    start = data.draw(st.integers(0, records.num_rows - 1))
    columns = Columns.of(records).slice(start, records.num_rows - start)
    by_columns = _rows(route_columns(columns, names, peers))
    by_rows = route(columns.rows(), field_key(names), peers)
    # Each record by its "value", unique per record (a NaN key is not equal to itself).
    assert [[r["value"] for r in part] for part in by_columns] == [
        [r["value"] for r in part] for part in by_rows
    ]


@settings(max_examples=300, deadline=None)
@given(key_columns())
def test_the_column_hash_of_a_key_is_its_stable_hash(
    batch: tuple[list[str], pa.RecordBatch],
) -> None:
    names, records = batch
    keys = records.column(names[0])
    assert column_hash(keys).to_pylist() == [stable_hash(k) for k in keys.to_pylist()]
    both = pa.StructArray.from_arrays([records.column(n) for n in names], names)
    expected = [stable_hash(tuple(r.values())) for r in both.to_pylist()]
    assert column_hash(both).to_pylist() == expected


def test_equal_keys_of_every_kind_hash_alike_as_columns() -> None:
    # 1 == 1.0 == True and 0.0 == -0.0, as Python's own equality has it: the row path
    # sends them to one worker, so the column path must too.
    ints = column_hash(pa.array([0, 1, 7, -3, 2**62], pa.int64())).to_pylist()
    floats = column_hash(pa.array([-0.0, 1.0, 7.0, -3.0, 2.0**62])).to_pylist()
    unsigned = column_hash(pa.array([0, 1, 7], pa.uint64())).to_pylist()
    bools = column_hash(pa.array([False, True])).to_pylist()
    assert ints == floats and unsigned == ints[:3] and bools == ints[:2]
    assert ints[:3] == [0, 1, 7] and ints[3] == stable_hash(-3)
    big = column_hash(pa.array([2**63 + 5, 2**64 - 1], pa.uint64())).to_pylist()
    assert big == [2**63 + 5, 2**64 - 1]
    strings = pa.array(["a", None, "a"]).dictionary_encode()
    a, null = stable_hash("a"), stable_hash(None)
    assert column_hash(strings).to_pylist() == [a, null, a]


def test_a_batch_bound_for_one_worker_goes_whole() -> None:
    batch = Columns.of(pa.record_batch({"k": [4, 4, 4], "v": [1, 2, 3]}))
    assert route_columns(batch, ["k"], 2) == [batch, None]
    assert route_columns(batch, ["k"], 2)[0] is batch  # no copy


def test_a_key_function_and_its_errors() -> None:
    batch = Columns.of(pa.record_batch({"k": [1, 2, 3], "v": [5, 6, 7]}))
    by_value = route_columns(batch, lambda b: b.record_batch().column("v"), 2)
    assert _rows(by_value) == [[{"k": 2, "v": 6}], [{"k": 1, "v": 5}, {"k": 3, "v": 7}]]
    with pytest.raises(ValueError, match="the column key gave 1 keys for 3 records"):
        route_columns(batch, lambda b: pa.array([1]), 2)
    with pytest.raises(TypeError, match="cannot route by a key column of type list<item: int64>"):
        route_columns(batch, lambda b: pa.array([[1], [2], [3]]), 2)
    with pytest.raises(TypeError, match=r"a sequence of names: \['k'\], not 'k'"):
        field_key("k")


async def mixed_edge(worker: Worker, peers: int) -> list[Any]:
    """Lists and columns with the same keys on one exchange edge, from every worker."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        # A column key beside the row key: columns are routed by kernels and stay columns.
        from operators.builder import OperatorBuilder

        builder = OperatorBuilder(scope, "Look")
        port = builder.new_input(stream, exchange=field_key(["key"]), columns=["key"])
        output, result = builder.new_output()

        def constructor() -> Any:
            def logic() -> None:
                for time, batch in port.containers():
                    kind = type(batch).__name__
                    rows = batch if isinstance(batch, list) else batch.rows()
                    seen.extend((time, kind, r["key"], r["n"]) for r in rows)
                    output.forward(time, batch)

            return logic

        builder.build_reactive(constructor)
        return handle, result.probe()

    handle, probe = worker.dataflow(build)
    keys: list[Any] = ["a", None, -5, 2**40, 3, 3.0, True, "b"]
    records = [{"key": k, "n": 10 * worker.index + i} for i, k in enumerate(keys)]
    handle.send_batch(records[:3])
    handle.send_batch(Columns.of(pa.record_batch({"key": ["a", None, "b"], "n": [100, 101, 102]})))
    handle.send_batch(Columns.of(pa.record_batch({"key": [-5, 3, 1], "n": [200, 201, 202]})))
    handle.send_batch(Columns.of(pa.record_batch({"key": [3.0, 2.0**40], "n": [300, 301]})))
    handle.send_batch(records[3:])
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return seen


@pytest.mark.parametrize("layout", [*layouts(1, 3), pytest.param(Layout(2, 1), id="2x1")])
async def test_rows_and_columns_with_equal_keys_meet_on_one_worker(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, mixed_edge, layout.peers)
    where: dict[Any, set[int]] = {}
    kinds: set[str] = set()
    for index, seen in enumerate(results):
        for _time, kind, key, _n in seen:
            kinds.add(kind)
            where.setdefault(stable_hash(key), set()).add(index)
    assert all(len(workers) == 1 for workers in where.values())
    expected = {stable_hash(k) % layout.peers for k in ["a", None, -5, 2**40, 3, True, "b", 1]}
    assert {next(iter(w)) for w in where.values()} == expected
    assert kinds == ({"list", "Columns"})
    assert sum(len(seen) for seen in results) == layout.peers * 16
