"""The vector compiler: one walk of a checked expression's parse tree, to a function of columns.

Each node becomes a :class:`Compiled`: its shape (known from the variables' Arrow types) and
a function from a batch to its :class:`Vec`. A node with no vector form raises
:class:`NotVectorizedError` with the reason, and nothing of the expression is vectorized.
Operators and functions live in ``numbers.py``, ``compare.py`` and ``text.py``, selection,
indexing and lists in ``structure.py``, the macros in ``macros.py``; the logic operators,
``?:`` and map literals here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.syntax import (
    _Binary,
    _Call,
    _children,
    _Cond,
    _Ident,
    _Index,
    _List,
    _Lit,
    _Logic,
    _Map,
    _Node,
    _Select,
    _Unary,
)
from operators.graph.cel.types import _EXTENSION_METHODS, _MACROS, _NAMESPACED
from operators.graph.cel.types import DOUBLE as STATIC_DOUBLE
from operators.graph.cel.types import INT as STATIC_INT
from operators.graph.cel.types import NULL as STATIC_NULL
from operators.graph.cel.types import STRING as STATIC_STRING
from operators.graph.cel.types import UINT as STATIC_UINT
from operators.graph.cel.vector import compare, macros, numbers, text
from operators.graph.cel.vector.structure import element, field, list_of
from operators.graph.cel.vector.values import (
    ALWAYS,
    BOOL,
    BOOL_SHAPE,
    BOOLEAN,
    DOUBLE_SHAPE,
    ERROR,
    FAILING,
    FLOAT64,
    INT64,
    INT_SHAPE,
    LIST,
    NULL,
    NULL_SHAPE,
    NUMERIC,
    OPAQUE,
    STRING_SHAPE,
    STRUCT,
    UINT64,
    UINT_SHAPE,
    Compiled,
    Datum,
    Env,
    NotVectorizedError,
    Shape,
    Vec,
    column,
    conform,
    either,
    element_shape,
    field_shape,
    nulls,
    shape_of,
    strict,
    typed,
    untyped,
    where,
)

_LITERALS: Final = {
    STATIC_INT: (INT_SHAPE, INT64),
    STATIC_UINT: (UINT_SHAPE, UINT64),
    STATIC_DOUBLE: (DOUBLE_SHAPE, FLOAT64),
    STATIC_STRING: (STRING_SHAPE, pa.string()),
    "bool": (BOOL_SHAPE, BOOLEAN),
    STATIC_NULL: (NULL_SHAPE, pa.null()),
}
_NULL_BOOL: Final = pa.scalar(None, BOOLEAN)
_FREE: Final = NUMERIC | {BOOL, NULL, ERROR}
"""The kinds of value a comprehension pays nothing for (see :attr:`Builder.probed`)."""
_CONVERSIONS: Final = frozenset({"int", "uint", "double", "string"})


class Builder:
    """Compiles a checked parse tree.

    It is given its variables' shapes, the row backend's static types (by node ``id``) and
    the RE2 program size of each literal ``matches`` pattern.
    """

    def __init__(
        self,
        shapes: Mapping[str, Shape],
        static: Mapping[int, str],
        programs: Mapping[str, int],
        max_steps: int,
        counted: bool = False,
        probed: frozenset[int] = frozenset(),
    ) -> None:
        self.shapes = shapes
        self.static = static
        self.programs = programs
        self.max_steps = max_steps
        self.counted = counted
        """Whether the row backend counts steps per element in the expression's
        comprehensions (``matches`` in one, one nested in another)."""
        self.probed = probed
        """The nodes (by ``id``) whose values a comprehension pays for as it starts, by their
        size if they are strings, lists or maps (nothing for other values)."""

    def node(self, node: _Node) -> Compiled:
        """The compiled ``node`` (raises :class:`NotVectorizedError`)."""
        compiled = self.dispatch(node)
        if id(node) in self.probed and compiled.shape.kind not in _FREE:
            raise NotVectorizedError(
                "a comprehension whose body works on a string, list or map that does not"
                " depend on the element (the row backend counts its size against the step"
                " limit)"
            )
        return compiled

    def dispatch(self, node: _Node) -> Compiled:
        """The compiled ``node``, by its kind."""
        if isinstance(node, _Lit):
            return _literal(node)
        if isinstance(node, _Ident):
            return self.variable(node.name)
        if isinstance(node, _Select):
            return field(self.node(node.operand), node.name)
        if isinstance(node, _Index):
            return self.index(node)
        if isinstance(node, _Call):
            return self.call(node)
        if isinstance(node, _Unary):
            operand = self.node(node.operand)
            return _negated(operand) if node.op == "!" else numbers.negation(operand)
        if isinstance(node, _Binary):
            return self.binary(node)
        if isinstance(node, _Logic):
            return _logic(node.op, [self.node(operand) for operand in node.operands])
        if isinstance(node, _Cond):
            return _conditional(self.node(node.cond), self.node(node.then), self.node(node.orelse))
        if isinstance(node, _Map):
            return self.map_literal(node)
        if isinstance(node, _List):
            return list_of([self.node(item) for item in node.items])
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def variable(self, name: str) -> Compiled:
        """A variable: its column."""
        shape = self.shapes.get(name)
        if shape is None:
            raise NotVectorizedError(f"the variable {name} of a comprehension")
        return Compiled(shape, lambda env: Vec(env.columns[name]))

    def index(self, node: _Index) -> Compiled:
        """``a[i]``: a list's element, or a map's (a struct's) field named by a literal."""
        container = self.node(node.operand)
        if container.shape.kind == STRUCT and isinstance(node.index, _Lit):
            key = node.index.value
            return field(container, key) if type(key) is str else FAILING
        if container.shape.kind == STRUCT:
            raise NotVectorizedError("a map indexed by a value that is not a literal")
        return element(container, self.node(node.index))

    def binary(self, node: _Binary) -> Compiled:
        """An arithmetic operator, a comparison or ``in``."""
        op = node.op
        left = self.node(node.left)
        if op == "in" and isinstance(node.right, _List):
            return compare.membership(left, [self.node(item) for item in node.right.items])
        right = self.node(node.right)
        if op == "in":
            return compare.contained(left, right)
        right = self.node(node.right)
        if op in ("+", "-", "*", "/", "%"):
            return numbers.arithmetic(op, left, right, self.static.get(id(node), ""))
        if op in ("==", "!="):
            return compare.equality(op, left, right)
        return compare.ordering(op, left, right)

    def call(self, node: _Call) -> Compiled:
        """A function, a method or a macro (which has no vector form)."""
        name, args = node.name, node.args
        if node.target is None:
            if name == "has":
                assert isinstance(args[0], _Select)  # the checker made sure
                return _has(self.node(args[0].operand), args[0].name)
            if name == "matches":
                return self.matches(self.node(args[0]), args[1])
            if name in _NAMESPACED:
                raise NotVectorizedError(f"the function {name}")
            if name == "bool":
                raise NotVectorizedError("the conversion bool()")
            argument = self.node(args[0])
            return self.function(name, argument)
        if name in _MACROS:
            return self.macro(node)
        receiver = self.node(node.target)
        if name == "size":
            return text.size(receiver)
        if name == "matches":
            return self.matches(receiver, args[0])
        if name in ("lower", "upper"):
            return text.case(name, receiver)
        if name in _EXTENSION_METHODS:
            return text.extension(name, receiver, [self.node(arg) for arg in args])
        return text.substring(name, receiver, self.node(args[0]))

    def macro(self, node: _Call) -> Compiled:
        """``all``, ``exists``, ``map`` or ``filter`` over a list (see ``macros.py``)."""
        name, variable = node.name, node.args[0]
        assert node.target is not None and isinstance(variable, _Ident)  # the checker made sure
        if name == "exists_one":
            raise NotVectorizedError("the macro exists_one")
        if self.counted:
            raise NotVectorizedError(
                f"the macro {name} in an expression whose comprehensions count steps per"
                " element (one nested in another, or matches in one)"
            )
        target = self.node(node.target)
        if target.shape.kind == STRUCT:  # a macro over a map ranges over its keys
            target = _keys(target)
        if target.shape.kind == OPAQUE:
            raise NotVectorizedError(
                f"the macro {name} over a value of Arrow type {target.shape.type}"
            )
        if target.shape.kind != LIST:
            return FAILING  # no such overload
        shapes = {**self.shapes, variable.name: element_shape(target.shape)}
        inner = Builder(
            shapes, self.static, self.programs, self.max_steps, self.counted, self.probed
        )
        parts = [inner.node(arg) for arg in node.args[1:]]
        read = {name for arg in node.args[1:] for name in _names(arg)}
        outer = sorted(read.intersection(self.shapes) - {variable.name})
        return macros.comprehension(name, target, variable.name, parts, outer)

    def function(self, name: str, argument: Compiled) -> Compiled:
        """``dyn()``, ``size()`` or a conversion."""
        if name == "dyn":
            return argument
        if name == "size":
            return text.size(argument)
        assert name in _CONVERSIONS, name
        return numbers.conversion(name, argument)

    def matches(self, subject: Compiled, pattern: _Node) -> Compiled:
        """``subject.matches(pattern)``."""
        literal = pattern.value if isinstance(pattern, _Lit) else None
        program = self.programs.get(literal, 1) if isinstance(literal, str) else 1
        return text.matches(subject, literal, program, self.max_steps)

    def map_literal(self, node: _Map) -> Compiled:
        """``{"k": v, ...}``: a struct column (literal string keys only)."""
        names = [key.value for key in node.keys if isinstance(key, _Lit)]
        if len(names) != len(node.keys) or not all(type(name) is str for name in names):
            raise NotVectorizedError("a map whose keys are not literal strings")
        values = [self.node(value) for value in node.values]
        fields = [
            pa.field(str(name), value.shape.type) for name, value in zip(names, values, strict=True)
        ]
        struct = pa.struct(fields)
        runs = [value.run for value in values]

        def run(env: Env) -> Vec:
            vecs = [value(env) for value in runs]
            arrays = [
                column(typed(vec.values, f.type), env.length)
                for vec, f in zip(vecs, fields, strict=True)
            ]
            if not fields:  # {}: a struct of no field has no column to take its length from
                array = pa.StructArray.from_buffers(struct, env.length, [None])
            else:
                array = pa.StructArray.from_arrays(arrays, fields=fields)
            return Vec(array, either(*(vec.errors for vec in vecs)))

        return Compiled(Shape(STRUCT, struct), run)


def _keys(container: Compiled) -> Compiled:
    """A map's (a struct's) keys, as a list on every row (where it is not null)."""
    names = [field.name for field in container.shape.type]
    keys = list_of([_literal(_Lit(0, name, STATIC_STRING)) for name in names])
    inner, lists = container.run, keys.run

    def run(env: Env) -> Vec:
        x = inner(env)
        return Vec(lists(env).values, either(x.errors, nulls(x.values)))

    return Compiled(keys.shape, run)


def _names(node: _Node) -> set[str]:
    """The names ``node`` reads (a comprehension's variables among them: a superset)."""
    if isinstance(node, _Ident):
        return {node.name}
    return {name for child in _children(node) for name in _names(child)}


def _literal(node: _Lit) -> Compiled:
    shape, arrow = _LITERALS[node.type]
    scalar = pa.scalar(node.value, arrow)
    vec = Vec(scalar)
    return Compiled(shape, lambda _env: vec, node.value)


def _negated(a: Compiled) -> Compiled:
    """``!a``."""
    if a.shape.kind == OPAQUE:
        raise NotVectorizedError(f"! on a value of Arrow type {a.shape.type}")
    if a.shape.kind != BOOL:
        return FAILING
    operand = a.run

    def run(env: Env) -> Vec:
        x = operand(env)
        return Vec(pc.invert(x.values), strict(x))

    return Compiled(BOOL_SHAPE, run)


def _has(operand: Compiled, name: str) -> Compiled:
    """``has(operand.name)``: whether a map (a struct) has the key."""
    if operand.shape.kind == OPAQUE:
        raise NotVectorizedError(f"has() on a value of Arrow type {operand.shape.type}")
    if operand.shape.kind != STRUCT:
        return FAILING
    present = pa.scalar(field_shape(operand.shape, name) is not None)
    inner = operand.run

    def run(env: Env) -> Vec:
        x = inner(env)
        return Vec(present, either(x.errors, nulls(x.values)))

    return Compiled(BOOL_SHAPE, run)


def _logic(op: str, operands: list[Compiled]) -> Compiled:
    """``a && b && ...`` or ``a || b || ...``: Kleene's logic over errors as nulls.

    An operand that failed (or is not a bool) is a null; ``and_kleene``'s ``false`` and
    ``or_kleene``'s ``true`` absorb a null, as CEL's ``&&`` and ``||`` absorb an error (from
    either side); a null left in the result is a row that failed.
    """
    kleene = pc.and_kleene if op == "&&" else pc.or_kleene
    runs = [operand.run for operand in operands if operand.shape.kind == BOOL]
    failing = len(runs) < len(operands)  # an operand that is not a bool fails on every row

    def run(env: Env) -> Vec:
        result: Datum = _NULL_BOOL if failing else None
        for operand in runs:
            vec = operand(env)
            value = where(strict(vec), _NULL_BOOL, vec.values)
            result = value if result is None else kleene(result, value)
        return Vec(result, nulls(result))

    return Compiled(BOOL_SHAPE, run)


def _conditional(test: Compiled, then: Compiled, orelse: Compiled) -> Compiled:
    """``test ? then : orelse``, lazily: a row fails if ``test`` fails, or the branch taken."""
    if test.shape.kind != BOOL:
        return FAILING
    shape = _unified(then.shape, orelse.shape)
    first, second, condition = then.run, orelse.run, test.run

    def run(env: Env) -> Vec:
        c = condition(env)
        broken = strict(c)
        if isinstance(c.values, pa.Scalar):  # one branch for every row: only it is evaluated
            if not c.values.is_valid:
                return Vec(pa.scalar(None, shape.type), ALWAYS)
            taken = (first if c.values.as_py() else second)(env)
            return Vec(typed(taken.values, shape.type), either(broken, taken.errors))
        x, y = first(env), second(env)
        values = pc.if_else(c.values, typed(x.values, shape.type), typed(y.values, shape.type))
        chosen = pc.fill_null(c.values, False) if c.values.null_count else c.values
        errors = either(
            broken,
            None if x.errors is None else pc.and_(chosen, x.errors),
            None if y.errors is None else pc.and_(pc.invert(chosen), y.errors),
        )
        return Vec(values, errors)

    return Compiled(shape, run)


def _unified(a: Shape, b: Shape) -> Shape:
    """The shape of ``c ? a : b``: one Arrow type (a ``null`` or failing branch takes any)."""
    if a.kind in (ERROR, NULL) or (untyped(a.type) and a.kind == b.kind):
        return b if b.kind != ERROR else a
    if b.kind in (ERROR, NULL) or a.type == b.type or (untyped(b.type) and a.kind == b.kind):
        return a
    raise NotVectorizedError(f"?: with branches of different types ({a.type} and {b.type})")


def variable_shapes(types: Mapping[str, pa.DataType]) -> dict[str, Shape]:
    """Each variable's shape, from its Arrow type."""
    return {name: shape_of(arrow) for name, arrow in types.items()}


def conformed(
    columns: Mapping[str, pa.Array], types: Mapping[str, pa.DataType]
) -> dict[str, pa.Array]:
    """The variables' columns as their shapes say (see :func:`conform`)."""
    return {name: conform(columns[name], types[name]) for name in types}
