"""The compiler: a checked expression to one Python function, and its batch forms."""

from __future__ import annotations

import ast
import copy
from typing import Final

from operators.graph.cel.calls import _Calls
from operators.graph.cel.core import BATCH_SHAPES
from operators.graph.cel.emit import (
    _and,
    _arguments,
    _call,
    _Code,
    _compare,
    _const,
    _if,
    _load,
    _store,
    _translating,
    _type_of,
)
from operators.graph.cel.emitter import _STEPS
from operators.graph.cel.ops import _Operators
from operators.graph.cel.syntax import (
    _Binary,
    _Call,
    _children,
    _Cond,
    _Ident,
    _Index,
    _is_macro,
    _List,
    _Lit,
    _Logic,
    _Map,
    _Node,
    _Select,
    _Unary,
)
from operators.graph.cel.types import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    LIST,
    MAP,
    NULL,
    STRING,
    UINT,
    _show_key,
)


class _Compiler(_Calls, _Operators):
    """Checks an expression's types and generates its Python, in one walk of the parse tree."""

    # -- the whole expression

    def module(self, tree: _Node) -> tuple[ast.Module, str]:
        """``_cel(*variables)``, and the functions it calls.

        ``&&``, ``||``, ``all`` and ``exists`` absorb errors, as CEL says: ``error || true`` is
        ``true`` and ``false && error`` is ``false``, from either side. Absorbing needs every
        operand evaluated under a ``try``, which costs on every record; so ``_cel`` evaluates
        them left to right, short-circuiting (what the result is whenever nothing fails), and
        only when something fails evaluates the expression again with errors absorbed
        (``_cel_absorbing``: expressions have no side effects). A record on which nothing
        fails pays nothing for it.
        """
        code = self.expr(tree)
        args = [ast.arg(arg=name) for name in self.variables]
        fallback: ast.expr | None = None
        functions: list[ast.stmt] = []
        self.absorbs = _absorbs(tree)
        if self.absorbs:
            self.absorbing = True
            try:
                absorbing = self.expr(tree)
            finally:
                self.absorbing = False
            functions.append(self.definition("_cel_absorbing", args, absorbing.expr, None))
            fallback = _call("_cel_absorbing", *(_load(name) for name in self.variables))
        main = self.definition("_cel", args, code.expr, fallback)
        self.result = code
        return ast.Module(body=[*self.functions, *functions, main], type_ignores=[]), code.type

    def definition(
        self, name: str, args: list[ast.arg], value: ast.expr, fallback: ast.expr | None
    ) -> ast.FunctionDef:
        """``def name(*args): return value`` (see :func:`_translating`), with a step counter."""
        body: list[ast.stmt] = [_translating(value, fallback)]
        if self.cell:
            body.insert(0, ast.Assign(targets=[_store(_STEPS)], value=self.steps_cell()))
        return ast.FunctionDef(
            name=name, args=_arguments(args), body=body, decorator_list=[], returns=None
        )

    def batch(self, shape: str) -> ast.FunctionDef:
        """``_cel_<shape>(_values, *other variables)``: the expression over a whole batch.

        Built after :meth:`module`, from the same expression tree (copied): one list
        comprehension over the first variable, in the same ``try`` that turns Python's
        exceptions into :class:`EvaluationError`. If the expression absorbs errors (see
        :meth:`module`) and a value fails, the batch is evaluated again by ``_cel``, value by
        value: what absorbing gives, or the first error that remains.
        """
        rest = self.variables[1:]
        fast = self.comprehension(shape, copy.deepcopy(self.result))
        fallback = None
        if self.absorbs:
            each = _call("_cel", *(_load(name) for name in self.variables))
            fallback = self.comprehension(shape, _Code(each, self.result.type))
        body: list[ast.stmt] = [_translating(fast, fallback)]
        args = [ast.arg(arg="_values"), *(ast.arg(arg=name) for name in rest)]
        return ast.FunctionDef(
            name=f"_cel_{shape}", args=_arguments(args), body=body, decorator_list=[], returns=None
        )

    def comprehension(self, shape: str, code: _Code) -> ast.ListComp:
        """The list comprehension of the batch form ``shape`` of ``code`` (see :meth:`batch`)."""
        first = self.variables[0]
        generator = ast.comprehension(
            target=_store(first), iter=_load("_values"), ifs=[], is_async=0
        )
        element: ast.expr
        if shape == "map":
            element = code.expr
        elif shape == "filter":
            element = _load(first)
            generator.ifs.append(self.filter_test(code))
        elif shape == "key":
            element = self.hashable(code)
        elif shape == "pairs":
            element = ast.Tuple(elts=[self.hashable(code), _load(first)], ctx=ast.Load())
        else:
            raise ValueError(f"unknown batch shape {shape!r} (known: {', '.join(BATCH_SHAPES)})")
        generators = [generator]
        if self.cell:
            # A counter per value, bound as the comprehension's loop variable: ``for _k in
            # [cell]`` compiles to a plain assignment. The filter's test uses it, so it moves.
            cell = ast.List(elts=[self.steps_cell()], ctx=ast.Load())
            steps = ast.comprehension(target=_store(_STEPS), iter=cell, ifs=[], is_async=0)
            steps.ifs, generator.ifs = generator.ifs, []
            generators.append(steps)
        return ast.ListComp(elt=element, generators=generators)

    def filter_test(self, code: _Code) -> ast.expr:
        """``code is True``, failing on a value that is not a bool (as ``filter`` does)."""
        if code.type == BOOL:
            return code.expr
        first, ref = self.bind(code.expr)
        is_true = _compare(first, ast.Is(), _const(True))
        not_false = _compare(ref(), ast.IsNot(), _const(False))
        fail = _call("_not_bool", _const("a filter"), ref())
        return ast.BoolOp(op=ast.Or(), values=[is_true, _and(not_false, fail)])

    def hashable(self, code: _Code) -> ast.expr:
        """``code`` as a key: lists become tuples, ``-0.0`` is ``0.0`` and maps fail.

        Checked only when needed. ``-0.0 == 0.0``, so they are one key: written ``0.0``
        whichever came first (as the columnar path writes it).
        """
        if code.type in (INT, UINT, STRING, BOOL, NULL):
            return code.expr
        if code.type == DOUBLE:
            return ast.BinOp(left=code.expr, op=ast.Add(), right=_const(0.0))  # -0.0 + 0.0 is 0.0
        first, ref = self.bind(code.expr)
        plain = _and(
            _compare(_type_of(first), ast.IsNot(), _load("_list")),
            _compare(_type_of(ref()), ast.IsNot(), _load("_dict")),
            _compare(_type_of(ref()), ast.IsNot(), _load("_float")),
        )
        return _if(plain, ref(), _call("_hashable", ref()))

    def node(self, node: _Node) -> _Code:
        if isinstance(node, _Lit):
            return _Code(_const(node.value), node.type)
        if isinstance(node, _Ident):
            name = self.scope.get(node.name)
            if name is None:
                self.ill_typed(f"unknown identifier {node.name!r}", node.pos)
            return _Code(_load(name), DYN)
        if isinstance(node, _Select):
            return self.select(node)
        if isinstance(node, _Index):
            return self.index(node)
        if isinstance(node, _Call):
            return self.call(node)
        if isinstance(node, _Unary):
            return self.unary(node)
        if isinstance(node, _Binary):
            return self.binary(node)
        if isinstance(node, _Logic):
            return self.logic(node)
        if isinstance(node, _Cond):
            return self.conditional(node)
        if isinstance(node, _List):
            items = [self.expr(item).expr for item in node.items]
            return _Code(ast.List(elts=items, ctx=ast.Load()), LIST)
        if isinstance(node, _Map):
            return self.map_literal(node)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    # -- selection and indexing

    def select(self, node: _Select) -> _Code:
        operand = self.expr(node.operand)
        if operand.type not in (MAP, DYN):
            self.ill_typed(f"no such overload: field selection on {operand.type}", node.pos)
        subscript = ast.Subscript(value=operand.expr, slice=_const(node.name), ctx=ast.Load())
        return _Code(subscript, DYN)

    def index(self, node: _Index) -> _Code:
        container, index = self.expr(node.operand), self.expr(node.index)
        ct, it = container.type, index.type
        valid = (
            (ct == LIST and it in (INT, UINT, DOUBLE, DYN))
            or (ct == MAP and it not in (LIST, MAP, NULL))
            or (ct == DYN and it not in (LIST, MAP, NULL))
        )
        if not valid:
            self.ill_typed(f"no such overload: {ct}[{it}]", node.pos)
        key = index.expr
        literal = key.value if isinstance(key, ast.Constant) else None
        plain_list = type(literal) is int and literal >= 0
        plain_map = type(literal) is str
        if (ct == LIST and plain_list) or (ct == MAP and plain_map):
            return _Code(ast.Subscript(value=container.expr, slice=key, ctx=ast.Load()), DYN)
        if ct == DYN and (plain_list or plain_map):
            first, ref = self.bind(container.expr)
            guard = _compare(_type_of(first), ast.Is(), _load("_list" if plain_list else "_dict"))
            subscript = ast.Subscript(value=ref(), slice=_const(literal), ctx=ast.Load())
            return _Code(_if(guard, subscript, _call("_index", ref(), _const(literal))), DYN)
        return _Code(_call("_index", container.expr, key), DYN)

    def logic(self, node: _Logic) -> _Code:
        values: list[ast.expr] = []
        for k, operand in enumerate(node.operands):
            code = self.expr(operand)
            pos = node.positions[max(k - 1, 0)]
            values.append(self.checked_bool(code, f"the operands of '{node.op}'", pos))
        if self.absorbing:  # each operand a thunk, evaluated (and its error kept) by a helper
            thunks = [ast.Lambda(args=_arguments([]), body=value) for value in values]
            return _Code(_call("_all_of" if node.op == "&&" else "_any_of", *thunks), BOOL)
        op: ast.boolop = ast.And() if node.op == "&&" else ast.Or()
        return _Code(ast.BoolOp(op=op, values=values), BOOL)

    def conditional(self, node: _Cond) -> _Code:
        test = self.checked_bool(self.expr(node.cond), "the condition of '?:'", node.pos)
        then, orelse = self.expr(node.then), self.expr(node.orelse)
        result = then.type if then.type == orelse.type else DYN
        return _Code(_if(test, then.expr, orelse.expr), result)

    def map_literal(self, node: _Map) -> _Code:
        keys = [self.expr(key) for key in node.keys]
        values = [self.expr(value).expr for value in node.values]
        seen: list[object] = []
        for key_node, key in zip(node.keys, keys, strict=True):
            if key.type not in (INT, UINT, BOOL, STRING, DYN):
                self.ill_typed(f"unsupported map key type: {key.type}", key_node.pos)
            if isinstance(key.expr, ast.Constant):
                if key.expr.value in seen:
                    self.fail(f"duplicate map key: {_show_key(key.expr.value)}", key_node.pos)
                seen.append(key.expr.value)
        if all(isinstance(key.expr, ast.Constant) for key in keys):
            return _Code(ast.Dict(keys=[key.expr for key in keys], values=values), MAP)
        key_list = ast.List(elts=[key.expr for key in keys], ctx=ast.Load())
        value_list = ast.List(elts=values, ctx=ast.Load())
        return _Code(_call("_map_of", key_list, value_list), MAP)


def _absorbs(node: _Node) -> bool:
    """Whether ``node`` has an ``&&``, ``||``, ``all`` or ``exists`` (which absorb errors)."""
    if isinstance(node, _Logic) or (
        _is_macro(node) and isinstance(node, _Call) and node.name in _ABSORBING
    ):
        return True
    return any(_absorbs(child) for child in _children(node))


_ABSORBING: Final = frozenset({"all", "exists"})
