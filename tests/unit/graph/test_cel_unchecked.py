"""``compile_expression(..., check=False)``: CEL without its optional type checker.

Unchecked, what the checker refuses at submission is an :class:`EvaluationError` when that part
of the expression is evaluated, with the checker's message; ``&&``, ``||``, ``?:``, ``all`` and
``exists`` absorb or skip it as any error. Checked (the default, what the service uses),
nothing changes: the same expressions are refused at submission with the same messages.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from operators.graph import EvaluationError, ExpressionError, compile_expression
from operators.graph.cel.vector import NotVectorized, compile_vector


def unchecked(source: str, record: Any = None) -> Any:
    return compile_expression(source, ["r"], check=False).fn(record)


def failure(source: str, record: Any = None) -> str:
    with pytest.raises(EvaluationError) as info:
        unchecked(source, record)
    assert type(info.value) is EvaluationError
    return str(info.value)


def refusal(source: str) -> str:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source, ["r"])
    return str(info.value)


# --------------------------------------------------------------------------- the values


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # an unknown variable, function or method is an error, which || and && absorb
        ("x || true", True),
        ("true || x", True),
        ("x && false", False),
        ("f_unknown(17) || true", True),
        ("a.as() || true", True),
        ("r.nope() || true", True),
        # a non-bool operand: decided by the other side (short-circuit, or absorbed)
        ("false && 32", False),
        ("32 && false", False),
        ("true || 32", True),
        ("32 || true", True),
        # ?: evaluates only the branch taken; all and exists absorb like && and ||
        ("true ? 1 : x", 1),
        ("false ? f(1) : 'b'", "b"),
        ("[1, 2].exists(e, e == 2 || e)", True),
        ("[0, 1].all(e, e == 1 && e)", False),
        # what type-checks is as checked
        ("r.value * 2 > 10", True),
        ("1u + 2u", 3),
    ],
)
def test_unchecked_values(source: str, expected: Any) -> None:
    value = unchecked(source, {"value": 6})
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x", "unknown identifier 'x'"),
        ("x || false", "unknown identifier 'x'"),
        ("f_unknown(17)", "unknown function 'f_unknown'"),
        ("f_unknown(17) && true", "unknown function 'f_unknown'"),
        ("r.as()", "unknown method 'as'"),
        ("size(1, 2)", "size() takes 1 argument, got 2"),
        ("true && 32", "the operands of '&&' must be bool, not int"),
        ("32 || false", "the operands of '||' must be bool, not int"),
        ("'a' ? 1 : 2", "the condition of '?:' must be bool, not string"),
        ("[1].all(e, 1)", "the predicate of all() must be bool, not int"),
        ("1 + 'a'", "no such overload: int + string"),
        ("1 + 2.0 == 3.0", "no such overload: int + double"),
        ("-1u", "no such overload: -uint"),
        ("!1", "no such overload: !int"),
        ("{1.5: 2}", "unsupported map key type: double"),
        # the operand of a non-bool operand is evaluated first: its error wins
        ("(1 / 0) && true", "division by zero"),
        # a part refused so evaluates none of its operands
        ("f_unknown(1 / 0)", "unknown function 'f_unknown'"),
        ("a.as()", "unknown method 'as'"),
    ],
)
def test_unchecked_errors(source: str, message: str) -> None:
    assert failure(source, {"value": 6}) == message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x || true", "line 1, column 1: unknown identifier 'x'"),
        ("x", "line 1, column 1: unknown identifier 'x'"),
        ("f_unknown(17) || true", "line 1, column 1: unknown function 'f_unknown'"),
        ("a.as() || true", "line 1, column 3: unknown method 'as'"),
        ("false && 32", "line 1, column 7: the operands of '&&' must be bool, not int"),
        ("32 && false", "line 1, column 4: the operands of '&&' must be bool, not int"),
        ("32 || true", "line 1, column 4: the operands of '||' must be bool, not int"),
        ("1 + 'a'", "line 1, column 3: no such overload: int + string"),
    ],
)
def test_checked_by_default_refuses_them_at_submission(source: str, message: str) -> None:
    assert refusal(source) == message
    with pytest.raises(ExpressionError):
        compile_expression(source, ["r"], check=True)


def test_what_the_checker_takes_is_the_same_program_unchecked() -> None:
    for source in ("r.value * 2 > 10 && r.key != 'x'", "r.xs.map(x, x * x)", "x.size()"):
        try:
            checked = compile_expression(source, ["r"])
        except ExpressionError:
            checked = None
        loose = compile_expression(source, ["r"], check=False)
        assert loose.checked is False
        if checked is not None:
            assert checked.checked is True
            assert loose.python == checked.python
            assert loose.cost == checked.cost
            assert loose.result_type == checked.result_type


def test_unchecked_keeps_every_other_refusal() -> None:
    def refused(source: str, **limits: Any) -> str:
        with pytest.raises(ExpressionError) as info:
            compile_expression(source, ["r"], check=False, **limits)
        return info.value.message

    assert refused("r.value )") == "unexpected token ')'"
    too_long = "expression too long (20 characters, the limit is 10)"
    assert refused("x" * 20, max_length=10) == too_long
    assert refused("r.matches('(')").startswith("invalid regular expression")
    assert refused("{1: 1, 1: 2}") == "duplicate map key: 1"
    assert refused("[1].all(1, true)") == "the first argument of all() must be a variable name"
    assert refused("r.a.map(x, r.b.map(y, r.c.map(z, z)))") == (
        "macros nested too deeply (more than 2 levels)"
    )
    # the cost estimate still holds: a comprehension over the record in one over the record
    assert refused("r.xs.exists(x, r.xs.exists(y, x == y)) || nope").startswith(
        "expression too costly"
    )


def test_unchecked_estimate_counts_a_refused_part_as_one_node() -> None:
    # f's argument would cost a comprehension over the record; f is never called
    loose = compile_expression("f(r.xs.map(x, x + 1)) || true", ["r"], check=False)
    assert loose.cost < compile_expression("r.xs.map(x, x + 1)", ["r"]).cost
    assert loose.fn({"xs": [1]}) is True


def test_unchecked_steps_are_counted() -> None:
    loose = compile_expression(
        "r.xs.all(x, r.xs.all(y, x != y || nope))", ["r"], check=False, max_cost=None, max_steps=50
    )
    with pytest.raises(EvaluationError) as info:
        loose.fn({"xs": list(range(100))})
    assert str(info.value) == "step limit exceeded: the record needs more than 50 steps"


def test_unchecked_batch_forms() -> None:
    loose = compile_expression("r > 1 || x", ["r"], check=False, batch=("map", "filter"))
    assert loose.batch["map"]([2, 3]) == [True, True]
    assert loose.batch["filter"]([2, 3]) == [2, 3]
    with pytest.raises(EvaluationError, match="unknown identifier 'x'"):
        loose.batch["map"]([0])


@pytest.mark.parametrize("name", ["true", "false", "null"])
def test_a_variable_named_as_a_literal_is_never_read(name: str) -> None:
    expression = compile_expression(name, [name])
    literal = {"true": True, "false": False, "null": None}[name]
    assert expression.fn("the variable's value") is literal
    both = compile_expression(f"[{name}, r]", [name, "r"])
    assert both.fn(7, 8) == [literal, 8]


@pytest.mark.parametrize("name", ["in", "as", "while", "if", "None", "True", "_r", "1r"])
def test_other_unusable_variable_names_are_still_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid variable name"):
        compile_expression("1", [name])


def test_the_vector_backend_and_unchecked_expressions() -> None:
    refused = compile_vector(compile_expression("x || r", ["r"], check=False), {"r": pa.bool_()})
    assert isinstance(refused, NotVectorized)
    reason = "compiled unchecked (check=False) and refused by the checker"
    assert str(refused) == f"not vectorized: {reason}"
    taken = compile_vector(compile_expression("r || false", ["r"], check=False), {"r": pa.bool_()})
    assert not isinstance(taken, NotVectorized)
    assert taken.evaluate(pa.array([True, False]))[0].to_pylist() == [True, False]
