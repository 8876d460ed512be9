"""Each graph operator on columns, on a small typed input: exact records, errors and plan.

Every test runs its graph on the columnar path and on the row path
(``compile_graph(columnar=False)``, the reference) on one worker, and asserts the exact
records per time (compared with their types: ``1`` is not ``1.0``), the dropped-record
counts and last message per node, and how the columnar plan runs the node
(``plan.typing.describe``): ``runs: columns``, or ``runs: rows`` with the reason where the
node has no columnar form. Under ``"on_error": "fail"``, both paths fail with the same
message. ``tests/property/test_columnar_graphs.py`` holds the two paths to the same results
on random graphs; its regressions are here too.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.graph import EvaluationError
from tests.runtime.fabrics import Clusters, Layout
from tests.runtime.typed_graphs import Feeds, Result, run_typed, text

INT64_MAX = 2**63 - 1
SCHEMA = {"k": "string", "v": "int64?", "w": "int64", "xs": {"list": "int64"}}
RECORDS = [
    {"k": "a", "v": 1, "w": 2, "xs": [1, 2]},
    {"k": "b", "v": None, "w": 0, "xs": []},
    {"k": "a", "v": 5, "w": 0, "xs": [3]},
    {"k": "c", "v": -3, "w": 1, "xs": [INT64_MAX]},
    {"k": "b", "v": INT64_MAX, "w": 3, "xs": [0, 0]},
]
FEEDS: Feeds = {"in": [(0, RECORDS[:3]), (1, RECORDS[3:])]}
"""Three records at time 0, two at time 1."""
COLUMNS = {"runs": "columns"}
SUMS = {"runs": "columns", "how": "sum"}


def through(node: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    """in (typed) -> n -> out."""
    return {
        "nodes": {"in": {"op": "input", "schema": schema}, "n": node, "out": {"op": "output"}},
        "edges": [["in", "n"], ["n", "out"]],
    }


def exact(expected: dict[int, list[Any]]) -> dict[int, list[str]]:
    """Records per time as :class:`Result` has them (typed texts, sorted)."""
    return {t: sorted(text(r) for r in rs) for t, rs in expected.items()}


ONE = Layout(1, 1)


async def both(document: dict[str, Any], feeds: Feeds = FEEDS, layout: Layout = ONE) -> Result:
    """The columnar run, once asserted to give exactly what the row path gives."""
    clusters = Clusters()
    try:
        rows = await run_typed(document, feeds, False, layout, clusters)
        columns = await run_typed(document, feeds, True, layout, clusters)
    finally:
        clusters.close()
    assert all(mode["runs"] == "rows" for mode in rows.modes.values())
    assert columns.outputs == rows.outputs
    assert columns.counts == rows.counts
    assert columns.last == rows.last
    return columns


async def fails(document: dict[str, Any], feeds: Feeds = FEEDS) -> str:
    """The message both paths fail the dataflow with (the same)."""
    messages = []
    for columnar in (False, True):
        with pytest.raises(EvaluationError) as caught:
            await run_typed(document, feeds, columnar)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    return messages[0]


def failing(node: dict[str, Any]) -> dict[str, Any]:
    return {**node, "on_error": "fail"}


# --------------------------------------------------------------------------- record by record


MAP = {"op": "map", "expr": "{'k': r.k, 'q': r.v / r.w}"}


async def test_map() -> None:
    result = await both(through(MAP))
    assert result.modes["n"] == COLUMNS
    assert result.outputs["out"] == exact(
        {
            0: [{"k": "a", "q": 0}],  # null / 0 and 5 / 0 are dropped
            1: [{"k": "c", "q": -3}, {"k": "b", "q": INT64_MAX // 3}],
        }
    )
    assert result.counts == {"n": 2}
    assert result.last == {"n": "division by zero"}
    assert await fails(through(failing(MAP))) == "node 'n': no such overload: null_type / int"


FILTER = {"op": "filter", "expr": "r.v > 0"}


async def test_filter() -> None:
    result = await both(through(FILTER))
    assert result.modes["n"] == COLUMNS
    assert result.outputs["out"] == exact({0: [RECORDS[0], RECORDS[2]], 1: [RECORDS[4]]})
    assert result.counts == {"n": 1}
    assert result.last == {"n": "no such overload: null_type > int"}
    assert await fails(through(failing(FILTER))) == "node 'n': no such overload: null_type > int"


async def test_a_filter_whose_value_is_not_a_bool_drops_the_record() -> None:
    result = await both(through({"op": "filter", "expr": "r.v"}))
    assert result.modes["n"] == COLUMNS
    assert result.outputs.get("out", {}) == {}
    assert result.counts == {"n": 5}
    assert result.last == {"n": "filter needs a bool, not int"}


FLAT_MAP = {"op": "flat_map", "expr": "r.xs.map(x, x + 1)"}


async def test_flat_map() -> None:
    result = await both(through(FLAT_MAP))
    assert result.modes["n"] == COLUMNS
    # [INT64_MAX] + 1 overflows: that record gives nothing.
    assert result.outputs["out"] == exact({0: [2, 3, 4], 1: [1, 1]})
    assert result.counts == {"n": 1}
    assert result.last == {"n": "integer overflow"}
    assert await fails(through(failing(FLAT_MAP))) == "node 'n': integer overflow"


EXCHANGE = {"op": "exchange", "key": "r.v % 2"}


@pytest.mark.parametrize("op", ["exchange", "key_by"])
async def test_exchange_and_key_by(op: str) -> None:
    node = {**EXCHANGE, "op": op}
    result = await both(through(node), layout=Layout(1, 2))
    assert result.modes["n"] == COLUMNS
    assert result.outputs["out"] == exact({0: [RECORDS[0], RECORDS[2]], 1: RECORDS[3:]})
    assert result.counts == {"n": 1}
    assert result.last == {"n": "no such overload: null_type % int"}
    assert await fails(through(failing(node))) == "node 'n': no such overload: null_type % int"


COUNT_BY = {"op": "count_by", "key": "r.w / r.v"}


async def test_count_by() -> None:
    result = await both(through(COUNT_BY))
    assert result.modes["n"] == COLUMNS
    # 2 / 1, 0 / 5; then 1 / -3 and 3 / INT64_MAX: both 0.
    assert result.outputs["out"] == exact(
        {0: [{"key": 2, "count": 1}, {"key": 0, "count": 1}], 1: [{"key": 0, "count": 2}]}
    )
    assert result.counts == {"n": 1}
    assert result.last == {"n": "no such overload: int / null_type"}
    assert await fails(through(failing(COUNT_BY))) == "node 'n': no such overload: int / null_type"


JOIN = {
    "nodes": {
        "in": {"op": "input", "schema": SCHEMA},
        "right": {"op": "map", "expr": "{'key': r.k, 'n': r.w}"},
        "j": {"op": "join", "key_left": "r.k + string(r.v / r.w)", "key_right": "r.key + '0'"},
        "out": {"op": "output"},
    },
    "edges": [["in", "j:0"], ["in", "right"], ["right", "j:1"], ["j", "out"]],
}


async def test_join() -> None:
    result = await both(JOIN)
    assert result.modes["j"] == COLUMNS
    assert result.modes["right"] == COLUMNS
    # Left keys: "a0" (1 / 2), fails (null), fails (5 / 0); "c-3", "b3074457345618258602".
    # Right keys: "a0", "b0", "a0"; "c0", "b0".
    assert result.outputs["out"] == exact(
        {
            0: [
                {"left": RECORDS[0], "right": {"key": "a", "n": 2}},
                {"left": RECORDS[0], "right": {"key": "a", "n": 0}},
            ]
        }
    )
    assert result.counts == {"j": 2}
    assert result.last == {"j": "division by zero"}
    document = {**JOIN, "nodes": {**JOIN["nodes"], "j": failing(JOIN["nodes"]["j"])}}
    assert await fails(document) == "node 'j': no such overload: null_type / int"


# --------------------------------------------------------------------------- folds


AGGREGATE = {"op": "aggregate", "key": "r.k", "init": "0", "fold": "acc + r.v * 2"}


async def test_aggregate() -> None:
    result = await both(through(AGGREGATE))
    assert result.modes["n"] == SUMS
    # A key whose every record failed its fold still has its sum: 0 ("b").
    assert result.outputs["out"] == exact(
        {
            0: [{"key": "a", "value": 12}, {"key": "b", "value": 0}],
            1: [{"key": "c", "value": -6}, {"key": "b", "value": 0}],
        }
    )
    assert result.counts == {"n": 2}
    assert result.last == {"n": "integer overflow"}
    assert await fails(through(failing(AGGREGATE))) == (
        "node 'n': no such overload: null_type * int"
    )


EMIT = {
    "op": "aggregate",
    "key": "r.k",
    "init": "0",
    "fold": "acc + r.w",
    "emit": "{'k': key, 'per': 12 / acc}",
}


async def test_aggregate_with_emit() -> None:
    result = await both(through(EMIT))
    assert result.modes["n"] == SUMS
    # "b" at time 0 sums to 0: its emit divides by zero.
    assert result.outputs["out"] == exact(
        {0: [{"k": "a", "per": 6}], 1: [{"k": "c", "per": 12}, {"k": "b", "per": 4}]}
    )
    assert result.counts == {"n": 1}
    assert result.last == {"n": "division by zero"}
    assert await fails(through(failing(EMIT))) == "node 'n': division by zero"


async def test_aggregate_key_and_fold_failures_at_one_time() -> None:
    """One time: keys are evaluated before folds on both paths, so the last is the fold's.

    (With the two records at two times the row path folds time 0 only once it is complete,
    after the key of time 1 failed; the columnar path as they arrive: the last messages
    differ, as the property test allows: its ``LATE_FOLDS``.)
    """
    document = through(
        {"op": "aggregate", "key": "r.j % 3", "init": "0", "fold": "acc + size(r.s)"},
        {"j": "int64?", "s": "string?"},
    )
    result = await both(document, {"in": [(0, [{"s": "a"}, {"j": 0}])]})
    assert result.outputs["out"] == exact({0: [{"key": 0, "value": 0}]})
    assert result.counts == {"n": 2}
    assert result.last == {"n": "no such overload: size(null_type)"}


async def test_aggregate_whose_every_key_fails_in_a_batch() -> None:
    """Found by the property test: every key of a batch failed, then the fold (a constant that
    always fails) was given no record, and its mask of no row raised an IndexError."""
    document = through(
        {
            "op": "aggregate",
            "key": "r.j % 0",
            "init": "0",
            "fold": "acc + (1 + 9223372036854775807) % 1000",
        },
        {"j": "int64"},
    )
    result = await both(document, {"in": [(0, [{"j": 1}, {"j": 2}])]})
    assert result.outputs.get("out", {}) == {}
    assert result.counts == {"n": 2}
    assert result.last == {"n": "modulus by zero"}


ACCUMULATE = {"op": "accumulate", "init": "0", "fold": "acc + 100 / r.w"}


async def test_accumulate() -> None:
    result = await both(through(ACCUMULATE), layout=Layout(1, 2))
    assert result.modes["n"] == SUMS
    assert result.outputs["out"] == exact({0: [50], 1: [133]})
    assert result.counts == {"n": 2}
    assert result.last == {"n": "division by zero"}
    assert await fails(through(failing(ACCUMULATE))) == "node 'n': division by zero"


# --------------------------------------------------------------------------- forwarders


async def test_count() -> None:
    result = await both(through({"op": "count"}), layout=Layout(1, 2))
    assert result.modes["n"] == {"runs": "columns", "how": "counts batch lengths"}
    assert result.outputs["out"] == exact({0: [3], 1: [2]})
    assert result.counts == {}


async def test_inspect() -> None:
    result = await both(through({"op": "inspect"}))
    assert result.modes["n"] == COLUMNS
    assert result.outputs["out"] == exact({0: RECORDS[:3], 1: RECORDS[3:]})


async def test_concat() -> None:
    document = {
        "nodes": {
            "in": {"op": "input", "schema": SCHEMA},
            "low": {"op": "filter", "expr": "r.w < 2"},
            "high": {"op": "filter", "expr": "r.w >= 2"},
            "c": {"op": "concat"},
            "out": {"op": "output"},
        },
        "edges": [["in", "low"], ["in", "high"], ["low", "c:0"], ["high", "c:1"], ["c", "out"]],
    }
    result = await both(document)
    assert result.modes["c"] == COLUMNS
    assert result.outputs["out"] == exact({0: RECORDS[:3], 1: RECORDS[3:]})


async def test_concat_of_two_types_runs_by_rows() -> None:
    document = {
        "nodes": {
            "in": {"op": "input", "schema": SCHEMA},
            "m": {"op": "map", "expr": "r.w"},
            "c": {"op": "concat"},
            "out": {"op": "output"},
        },
        "edges": [["in", "c:0"], ["in", "m"], ["m", "c:1"], ["c", "out"]],
    }
    result = await both(document)
    assert result.modes["c"] == {"runs": "rows", "why": "its inputs are of different types"}
    assert result.outputs["out"] == exact({0: [*RECORDS[:3], 2, 0, 0], 1: [*RECORDS[3:], 1, 3]})


# --------------------------------------------------------------------------- by rows, and why


@pytest.mark.parametrize(
    ("node", "why"),
    [
        (
            {"op": "filter", "expr": "r.xs.exists_one(x, x > 0)"},
            "not vectorized: the macro exists_one",
        ),
        (
            {"op": "accumulate", "init": "0", "fold": "acc + double(r.w)"},
            "the fold adds double, not an int (only int sums are exact)",
        ),
        (
            {"op": "aggregate", "key": "r.k", "init": "0.0", "fold": "acc + 1.5"},
            "the fold does not start from the int 0 (init), so it is not a sum",
        ),
        (
            {"op": "aggregate", "key": "r.k", "init": "0", "fold": "acc * 2 + r.w"},
            "not vectorized: the fold is not acc + <an expression of the record>",
        ),
        (
            {"op": "count_by", "key": "{'k': r.k}"},
            "the key 'key' gives struct<k: string>, not a scalar",
        ),
        (
            {"op": "exchange", "key": "r.xs"},
            "the key 'key' gives list<item: int64 not null>, not a scalar",
        ),
        ({"op": "flat_map", "expr": "r.w"}, "the expression gives int64, not a list"),
    ],
)
async def test_what_has_no_columnar_form_runs_by_rows(node: dict[str, Any], why: str) -> None:
    result = await both(through(node))
    assert result.modes["n"] == {"runs": "rows", "why": why}
    assert result.modes["in"]["runs"] == "columns"


async def test_a_join_of_keys_of_two_types_runs_by_rows() -> None:
    document = {**JOIN, "nodes": {**JOIN["nodes"], "j": {"op": "join", "key_left": "r.v"}}}
    document["nodes"]["j"]["key_right"] = "r.key"
    result = await both(document)
    why = "the keys are of two types (int64 and string)"
    assert result.modes["j"] == {"runs": "rows", "why": why}
    assert result.outputs.get("out", {}) == {}


async def test_what_follows_a_node_by_rows_runs_by_rows() -> None:
    # A map by rows makes new records (lists of JSON values): what reads them is untyped.
    document = through({"op": "map", "expr": '{"w": r.w, "one": r.xs.exists_one(x, x > 0)}'})
    document["nodes"]["m"] = {"op": "map", "expr": "r.w"}
    document["edges"] = [["in", "n"], ["n", "m"], ["m", "out"]]
    result = await both(document)
    assert result.modes["n"] == {"runs": "rows", "why": "not vectorized: the macro exists_one"}
    assert result.modes["m"] == {
        "runs": "rows",
        "why": "its input is not typed (no schema reaches it)",
    }
    assert result.outputs["out"] == exact({0: [2, 0, 0], 1: [1, 3]})


async def test_what_follows_a_filter_by_rows_runs_on_columns() -> None:
    # A filter by rows passes its input's records on: they are still of the input's type.
    document = through({"op": "filter", "expr": "r.xs.exists_one(x, x > 0)"})
    document["nodes"]["m"] = {"op": "map", "expr": "r.w"}
    document["edges"] = [["in", "n"], ["n", "m"], ["m", "out"]]
    result = await both(document)
    assert result.modes["n"] == {"runs": "rows", "why": "not vectorized: the macro exists_one"}
    assert result.modes["m"] == COLUMNS
    assert result.outputs["out"] == exact({0: [0], 1: [1]})


# --------------------------------------------------------------------------- regressions

ZEROS = {"f": "float64", "g": "float64"}


async def test_a_join_on_float_keys_pairs_minus_zero_with_zero() -> None:
    """Found by the property test: Arrow hashes ``-0.0`` and ``0.0`` apart, CEL has them equal.

    The join missed the pairs of ``-0.0`` with ``0.0`` (now keys are ``0.0`` for both).
    """
    document = {
        "nodes": {
            "in": {"op": "input", "schema": ZEROS},
            "j": {"op": "join", "key_left": "r.f", "key_right": "r.g"},
            "out": {"op": "output"},
        },
        "edges": [["in", "j:0"], ["in", "j:1"], ["j", "out"]],
    }
    records = [{"f": -0.0, "g": 0.0}, {"f": 0.0, "g": -0.0}]
    result = await both(document, {"in": [(0, records)]}, Layout(1, 2))
    assert result.modes["j"] == COLUMNS
    pairs = [{"left": left, "right": right} for left in records for right in records]
    assert result.outputs["out"] == exact({0: pairs})


@pytest.mark.parametrize(
    "node",
    [
        {"op": "count_by", "key": "r.f"},
        {"op": "aggregate", "key": "r.f", "init": "0", "fold": "acc + 1"},
    ],
    ids=["count_by", "aggregate"],
)
async def test_minus_zero_and_zero_are_one_key(node: dict[str, Any]) -> None:
    """Found by the property test: ``count_by`` on columns counted them as two keys."""
    records = [{"f": 0.0, "g": 1.0}, {"f": -0.0, "g": 1.0}]
    result = await both(through(node, ZEROS), {"in": [(0, records)]})
    assert result.modes["n"]["runs"] == "columns"
    count = "count" if node["op"] == "count_by" else "value"
    assert result.outputs["out"] == exact({0: [{"key": 0.0, count: 2}]})


async def test_the_key_of_minus_zero_seen_first() -> None:
    # -0.0 == 0.0: one key, written 0.0 on both paths whichever came first.
    records = [{"f": -0.0, "g": 1.0}, {"f": 0.0, "g": 1.0}]
    result = await both(through({"op": "count_by", "key": "r.f"}, ZEROS), {"in": [(0, records)]})
    assert result.outputs["out"] == exact({0: [{"key": 0.0, "count": 2}]})
