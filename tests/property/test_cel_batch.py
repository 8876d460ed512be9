"""An expression's batch forms agree with its per-record function on every batch.

``compile_expression(..., batch=...)`` evaluates a whole batch in one comprehension; the
graph compiler relies on it giving exactly what ``fn`` gives record by record, and raising
the first record's error when one fails (the compiler then falls back to ``fn``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.graph.cel import EvaluationError, compile_expression, hashable

EXPRESSIONS = [
    "r",
    "r * 2",
    "r % 7",
    "r.k",
    "r.v * 2 > 10 && r.k != 'x'",
    "r.v > 3",
    "r.flag",
    "[r.k, r.v]",
    "r.xs.map(x, x * 2)",
    "r.xs.exists(x, x > 2) ? 'big' : r.k",
    "size(r.xs) == 0 || r.xs[0] > 0",
    "{'k': r.k}",
]

# Records for which the expressions above sometimes succeed and sometimes fail.
scalars = st.one_of(st.integers(-(2**62), 2**62), st.sampled_from(["x", "y", ""]), st.none())
values = st.one_of(scalars, st.booleans(), st.lists(st.integers(-5, 5), max_size=3))
records = st.one_of(
    st.integers(-(2**62), 2**62),
    st.fixed_dictionaries(
        {},
        optional={
            "k": st.one_of(scalars, st.lists(st.integers(0, 3), max_size=2)),
            "v": values,
            "flag": st.one_of(st.booleans(), st.integers(0, 1)),
            "xs": st.lists(st.integers(-5, 5), max_size=4),
        },
    ),
)


def one_by_one(expression: str, shape: str, batch: list[Any]) -> list[Any]:
    """What the batch form must give, computed with ``fn`` record by record."""
    fn = compile_expression(expression).fn
    out: list[Any] = []
    for record in batch:
        value = fn(record)
        if shape == "map":
            out.append(value)
        elif shape == "filter":
            if type(value) is not bool:
                raise EvaluationError(f"a filter must be bool, not {type(value).__name__}")
            if value:
                out.append(record)
        elif shape == "key":
            out.append(hashable(value))
        else:
            out.append((hashable(value), record))
    return out


@pytest.mark.parametrize("shape", ["map", "filter", "key", "pairs"])
@pytest.mark.parametrize("expression", EXPRESSIONS)
@settings(max_examples=60, deadline=None)
@given(batch=st.lists(records, max_size=12))
def test_batch_form_equals_the_function_record_by_record(
    expression: str, shape: str, batch: list[Any]
) -> None:
    form = compile_expression(expression, batch=(shape,)).batch[shape]
    try:
        expected = one_by_one(expression, shape, batch)
    except EvaluationError:
        with pytest.raises(EvaluationError):
            form(batch)
    else:
        assert form(batch) == expected


def test_the_first_failing_record_gives_the_error() -> None:
    form = compile_expression("10 / r.d", batch=("map",)).batch["map"]
    assert form([{"d": 5}, {"d": 2}]) == [2, 5]
    with pytest.raises(EvaluationError, match=r"^division by zero$"):
        form([{"d": 5}, {"d": 0}, {"e": 1}])
    with pytest.raises(EvaluationError, match=r"^no such key: d$"):
        form([{"e": 1}, {"d": 0}])


def test_other_variables_are_fixed_for_the_batch() -> None:
    form = compile_expression("r + t", ["r", "t"], batch=("map",)).batch["map"]
    assert form([1, 2, 3], 10) == [11, 12, 13]


def test_keys_become_hashable_and_maps_are_refused() -> None:
    expression = compile_expression("r.k", batch=("key", "pairs"))
    assert expression.batch["key"]([{"k": [1, [2, "a"]]}, {"k": 3}]) == [(1, (2, "a")), 3]
    assert expression.batch["pairs"]([{"k": ["a"]}]) == [(("a",), {"k": ["a"]})]
    with pytest.raises(EvaluationError, match=r"^a key cannot be a map$"):
        expression.batch["key"]([{"k": {"a": 1}}])


def test_only_the_requested_forms_are_compiled() -> None:
    assert compile_expression("r").batch == {}
    assert sorted(compile_expression("r", batch=("pairs", "map")).batch) == ["map", "pairs"]


def test_bad_shapes_and_variable_free_batches_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown batch shape 'rows'"):
        compile_expression("r", batch=("rows",))
    with pytest.raises(ValueError, match="batch forms need a variable"):
        compile_expression("1 + 2", [], batch=("map",))
