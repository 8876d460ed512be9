"""Compiling operators: unary, arithmetic, ordering, equality and ``in``."""

from __future__ import annotations

import ast
import copy
from typing import NoReturn

from operators.graph.cel.emit import (
    _and,
    _call,
    _Code,
    _compare,
    _const,
    _if,
    _in_range,
    _load,
    _store,
    _type_of,
)
from operators.graph.cel.emitter import _Emitter
from operators.graph.cel.syntax import _Binary, _Node, _Unary
from operators.graph.cel.types import (
    _ARITHMETIC,
    _NUMERIC,
    _ORDERED,
    _PY_BINOP,
    _PY_CMPOP,
    _PY_TYPE,
    _SCALARS,
    BOOL,
    DOUBLE,
    DYN,
    INT,
    INT64_MAX,
    INT64_MIN,
    LIST,
    MAP,
    NULL,
    STRING,
    UINT,
)


class _Operators(_Emitter):
    """Compiles operators."""

    def unary(self, node: _Unary) -> _Code:
        operand = self.expr(node.operand)
        t = operand.type
        if node.op == "!":
            if t == BOOL:
                return _Code(ast.UnaryOp(op=ast.Not(), operand=operand.expr), BOOL)
            if t != DYN:
                self.ill_typed(f"no such overload: !{t}", node.pos)
            first, ref = self.bind(operand.expr)
            guard = _compare(_type_of(first), ast.Is(), _load("_bool"))
            negated = ast.UnaryOp(op=ast.Not(), operand=ref())
            fail = _call("_not_bool", _const("the operand of '!'"), ref())
            return _Code(_if(guard, negated, fail), BOOL)
        if isinstance(operand.expr, ast.Constant) and t in (INT, DOUBLE):
            value = operand.expr.value
            assert isinstance(value, int | float)
            if t == INT and -value > INT64_MAX:
                self.fail("integer overflow", node.pos)
            return _Code(_const(-value), t)
        if t == DOUBLE:
            return _Code(ast.UnaryOp(op=ast.USub(), operand=operand.expr), DOUBLE)
        if t == INT:
            first, ref = self.bind(operand.expr)
            negated = ast.UnaryOp(op=ast.USub(), operand=ref())
            guard = _compare(first, ast.NotEq(), _const(INT64_MIN))
            return _Code(_if(guard, negated, _call("_overflow")), INT)
        if t != DYN:
            self.ill_typed(f"no such overload: -{t}", node.pos)
        return _Code(_call("_neg", operand.expr), DYN)

    def binary(self, node: _Binary) -> _Code:
        op = node.op
        if op == "+" and id(node) not in self.chained and self.macro_depth:
            # In a comprehension, a + b + c copies each operand into the result, and again into
            # each longer result: at most once per + of the chain (see repeated).
            chain = _plus_chain(node)
            self.chained.update(id(link) for link in chain[1:])
            links = {id(link) for link in chain}
            operands = [n for link in chain for n in (link.left, link.right) if id(n) not in links]
            self.probing.update((id(n), len(chain)) for n in operands)
        left, right = self.expr(node.left), self.expr(node.right)
        if op in _ARITHMETIC:
            return self.arithmetic(node, left, right)
        if op in ("==", "!="):
            return self.equality(node, left, right)
        if op == "in":
            return self.membership(node, left, right)
        return self.ordering(node, left, right)

    def overload_error(self, node: _Binary, left: str, right: str) -> NoReturn:
        self.ill_typed(f"no such overload: {left} {node.op} {right}", node.pos)

    def arithmetic(self, node: _Binary, a: _Code, b: _Code) -> _Code:
        op, ta, tb = node.op, a.type, b.type
        allowed = _ARITHMETIC[op]
        if DYN not in (ta, tb):
            if ta != tb or ta not in allowed:
                self.overload_error(node, ta, tb)
            result = ta
        elif ta == tb:
            result = DYN
        else:
            result = tb if ta == DYN else ta
            if result not in allowed:
                self.overload_error(node, ta, tb)
        if op in ("/", "%"):
            return self.division(op, a, b, result)
        if result == LIST and DYN in (ta, tb):
            return _Code(_call("_arith", _const(op), a.expr, b.expr), LIST)
        if DYN not in (ta, tb):
            value: ast.expr = ast.BinOp(left=a.expr, op=_PY_BINOP[op](), right=b.expr)
            if result in (INT, UINT):
                temp = self.fresh("_t")
                in_range = _in_range(ast.NamedExpr(target=_store(temp), value=value), result)
                overflow = "_overflow" if result == INT else "_uoverflow"
                value = _if(in_range, _load(temp), _call(overflow))
            return _Code(value, result)
        if result == DYN:
            first_a, ref_a = self.bind(a.expr)
            first_b, ref_b = self.bind(b.expr)
            both_int = ast.Compare(
                left=_type_of(first_a),
                ops=[ast.Is(), ast.Is()],
                comparators=[_type_of(first_b), _load("_int")],
            )
            temp = self.fresh("_t")
            operation = ast.BinOp(left=ref_a(), op=_PY_BINOP[op](), right=ref_b())
            in_range = _in_range(ast.NamedExpr(target=_store(temp), value=operation), INT)
            slow = _call("_arith", _const(op), ref_a(), ref_b())
            return _Code(_if(_and(both_int, in_range), _load(temp), slow), DYN)
        dyn_left = ta == DYN
        first, ref = self.bind((a if dyn_left else b).expr)
        guard = _compare(_type_of(first), ast.Is(), _load(_PY_TYPE[result]))
        left, right = (ref(), b.expr) if dyn_left else (a.expr, ref())
        operation = ast.BinOp(left=left, op=_PY_BINOP[op](), right=right)
        fail = _call("_arith_fail", _const(op), ref(), _const(result), _const(dyn_left))
        if result in (INT, UINT):
            temp = self.fresh("_t")
            in_range = _in_range(ast.NamedExpr(target=_store(temp), value=operation), result)
            return _Code(_if(_and(guard, in_range), _load(temp), fail), result)
        return _Code(_if(guard, operation, fail), result)

    def division(self, op: str, a: _Code, b: _Code, result: str) -> _Code:
        """``/`` or ``%``: a helper call, or Python's ``//`` or ``%`` where they agree with CEL.

        Python's floor division and CEL's truncating one agree (and cannot overflow) when the
        dividend is a non-negative int and the divisor a positive one: so with a positive
        literal divisor, that case is done inline and the rest by the helper.
        """
        helper = "_div" if op == "/" else "_mod"
        divisor = b.expr.value if isinstance(b.expr, ast.Constant) else None
        if not (result in (INT, UINT) and type(divisor) is int and divisor > 0):
            return _Code(_call(helper, a.expr, b.expr), result)
        python_op: ast.operator = ast.FloorDiv() if op == "/" else ast.Mod()
        if a.type == UINT:
            return _Code(ast.BinOp(left=a.expr, op=python_op, right=_const(divisor)), result)
        first, ref = self.bind(a.expr)
        test: ast.expr = _compare(first, ast.GtE(), _const(0))
        if a.type == DYN:
            is_int = _compare(_type_of(first), ast.Is(), _load("_int"))
            test = _and(is_int, _compare(ref(), ast.GtE(), _const(0)))
        fast = ast.BinOp(left=ref(), op=python_op, right=_const(divisor))
        return _Code(_if(test, fast, _call(helper, ref(), _const(divisor))), result)

    def ordering(self, node: _Binary, a: _Code, b: _Code) -> _Code:
        op, ta, tb = node.op, a.type, b.type
        cmpop = _PY_CMPOP[op]
        if ta not in _SCALARS and tb not in _SCALARS and self.invariant(node.right):
            self.repeated(node.left, a, 1)  # strings compare character by character
        if DYN not in (ta, tb):
            if not ((ta in _NUMERIC and tb in _NUMERIC) or (ta == tb and ta in (STRING, BOOL))):
                self.overload_error(node, ta, tb)
            left, right = a.expr, b.expr
            if DOUBLE in (ta, tb) and ta != tb:  # an int and a double compare as doubles
                left, right = (
                    (_call("_float", left), right)
                    if tb == DOUBLE
                    else (left, _call("_float", right))
                )
            return _Code(_compare(left, cmpop(), right), BOOL)
        if ta == tb:
            first_a, ref_a = self.bind(a.expr)
            first_b, ref_b = self.bind(b.expr)
            both_int = ast.Compare(
                left=_type_of(first_a),
                ops=[ast.Is(), ast.Is()],
                comparators=[_type_of(first_b), _load("_int")],
            )
            fast = _compare(ref_a(), cmpop(), ref_b())
            return _Code(_if(both_int, fast, _call("_order", _const(op), ref_a(), ref_b())), BOOL)
        dyn_left = ta == DYN
        static = tb if dyn_left else ta
        if static not in _ORDERED:
            self.overload_error(node, ta, tb)
        if static == STRING:  # Python orders a str only against a str, as CEL does
            return _Code(_compare(a.expr, cmpop(), b.expr), BOOL)
        first, ref = self.bind((a if dyn_left else b).expr)
        left, right = (ref(), b.expr) if dyn_left else (a.expr, ref())
        if static == BOOL:
            guard = _compare(_type_of(first), ast.Is(), _load("_bool"))
            fail = _call("_fail", _const(op), ref(), _const(static), _const(dyn_left))
            return _Code(_if(guard, _compare(left, cmpop(), right), fail), BOOL)
        # a number of the static one's Python type compares at once; anything else (an int
        # and a double compare as doubles, a value of another type fails) through _order
        guard = _compare(_type_of(first), ast.Is(), _load("_float" if static == DOUBLE else "_int"))
        operands = (ref(), b.expr) if dyn_left else (a.expr, ref())
        slow = _call("_order", _const(op), *copy.deepcopy(operands))
        return _Code(_if(guard, _compare(left, cmpop(), right), slow), BOOL)

    def equality(self, node: _Binary, a: _Code, b: _Code) -> _Code:
        op, ta, tb = node.op, a.type, b.type
        equal = op == "=="
        identity: ast.cmpop = ast.Is() if equal else ast.IsNot()
        if DYN not in (ta, tb) and ta != tb and not (ta in _NUMERIC and tb in _NUMERIC):
            self.overload_error(node, ta, tb)
        if ta not in _SCALARS and tb not in _SCALARS and self.invariant(node.right):
            self.repeated(node.left, a, 1, deep=True)  # lists and maps compare element-wise
        if DYN not in (ta, tb):
            numeric = ta in _NUMERIC and tb in _NUMERIC
            if not numeric and ta != tb:
                self.overload_error(node, ta, tb)
            if numeric or ta in (STRING, BOOL):
                return _Code(_compare(a.expr, _PY_CMPOP[op](), b.expr), BOOL)
            if ta == NULL:
                return _Code(_compare(a.expr, identity, b.expr), BOOL)
        elif ta != tb:
            static = tb if ta == DYN else ta
            if static == STRING:  # a str equals only a str, in Python as in CEL
                return _Code(_compare(a.expr, _PY_CMPOP[op](), b.expr), BOOL)
            if static in (BOOL, NULL):  # True, False and None are singletons
                return _Code(_compare(a.expr, identity, b.expr), BOOL)
            if static in _NUMERIC:  # a number equals a number, but True == 1 in Python only
                # compare first, so that both operands are evaluated (and their errors raised)
                dyn_left = ta == DYN
                first, ref = self.bind((a if dyn_left else b).expr)
                left, right = (first, b.expr) if dyn_left else (a.expr, first)
                test = _compare(left, _PY_CMPOP[op](), right)
                bool_test: ast.cmpop = ast.IsNot() if equal else ast.Is()
                guard = _compare(_type_of(ref()), bool_test, _load("_bool"))
                joined = ast.BoolOp(op=ast.And() if equal else ast.Or(), values=[test, guard])
                return _Code(joined, BOOL)
        value: ast.expr = _call("_eq", a.expr, b.expr)
        if not equal:
            value = ast.UnaryOp(op=ast.Not(), operand=value)
        return _Code(value, BOOL)

    def membership(self, node: _Binary, a: _Code, b: _Code) -> _Code:
        if b.type not in (LIST, MAP, DYN):
            self.overload_error(node, a.type, b.type)
        items = b.expr.elts if isinstance(b.expr, ast.List) else None
        if items and all(isinstance(item, ast.Constant) for item in items):
            values = [item.value for item in items if isinstance(item, ast.Constant)]
            choices = ast.Tuple(elts=[_const(value) for value in values], ctx=ast.Load())
            numbers = all(type(value) in (int, float) for value in values)
            if all(type(value) is str for value in values) or (numbers and a.type in _NUMERIC):
                return _Code(_compare(a.expr, ast.In(), choices), BOOL)
            if numbers:
                first, ref = self.bind(a.expr)
                guard = _compare(_type_of(first), ast.IsNot(), _load("_bool"))
                return _Code(_and(guard, _compare(ref(), ast.In(), choices)), BOOL)
        self.repeated(node.right, b, 1, deep=True)  # every element visited (for a map, its keys)
        return _Code(_call("_in", a.expr, b.expr), BOOL)


def _plus_chain(node: _Binary) -> list[_Binary]:
    """``node`` and the ``+`` nodes below it through ``+`` only (``node`` first)."""
    chain: list[_Binary] = []
    pending: list[_Node] = [node]
    while pending:
        link = pending.pop()
        if isinstance(link, _Binary) and link.op == "+":
            chain.append(link)
            pending += [link.right, link.left]
    return chain
