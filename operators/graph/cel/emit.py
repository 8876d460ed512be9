"""Building Python's :mod:`ast`: small constructors the code generator uses."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from operators.graph.cel.types import INT64_MAX, INT64_MIN, UINT, UINT64_MAX


def _load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Store())


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def _call(function: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_load(function), args=list(args), keywords=[])


def _method(receiver: ast.expr, name: str, *args: ast.expr) -> ast.Call:
    func = ast.Attribute(value=receiver, attr=name, ctx=ast.Load())
    return ast.Call(func=func, args=list(args), keywords=[])


def _type_of(value: ast.expr) -> ast.Call:
    return _call("_type", value)


def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.Compare:
    return ast.Compare(left=left, ops=[op], comparators=[right])


def _if(test: ast.expr, body: ast.expr, orelse: ast.expr) -> ast.IfExp:
    return ast.IfExp(test=test, body=body, orelse=orelse)


def _and(*values: ast.expr) -> ast.BoolOp:
    return ast.BoolOp(op=ast.And(), values=list(values))


def _in_range(value: ast.expr, static: str) -> ast.Compare:
    low, high = (0, UINT64_MAX) if static == UINT else (INT64_MIN, INT64_MAX)
    return ast.Compare(
        left=_const(low), ops=[ast.LtE(), ast.LtE()], comparators=[value, _const(high)]
    )


@dataclass(frozen=True, slots=True)
class _Code:
    expr: ast.expr
    type: str


def _translating(value: ast.expr, fallback: ast.expr | None = None) -> ast.Try:
    """``return value``, with Python's exceptions turned into :class:`EvaluationError`.

    With ``fallback``, any exception returns ``fallback`` instead (what the expression gives
    when errors are absorbed: see :meth:`_Compiler.module`).
    """
    if fallback is not None:
        handler = ast.ExceptHandler(
            type=_load("_NATURAL"), name=None, body=[ast.Return(value=fallback)]
        )
        return ast.Try(body=[ast.Return(value=value)], handlers=[handler], orelse=[], finalbody=[])
    handlers = [
        ast.ExceptHandler(
            type=_load("_EvaluationError"), name=None, body=[ast.Raise(exc=None, cause=None)]
        ),
        ast.ExceptHandler(
            type=_load("_NATURAL"),
            name="_e",
            body=[ast.Raise(exc=_call("_translate", _load("_e")), cause=_const(None))],
        ),
    ]
    return ast.Try(body=[ast.Return(value=value)], handlers=handlers, orelse=[], finalbody=[])


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _arguments(args: list[ast.arg]) -> ast.arguments:
    return ast.arguments(
        posonlyargs=[],
        args=args,
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
