"""The static cost estimate (see :data:`MAX_COST`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from operators.graph.cel.codegen import _Compiler
from operators.graph.cel.extensions import MAX_PRECISION as _MAX_PRECISION
from operators.graph.cel.regex import _REGEX_COST_DIVISOR
from operators.graph.cel.syntax import (
    _Binary,
    _Call,
    _children,
    _Cond,
    _Ident,
    _Index,
    _List,
    _Lit,
    _Map,
    _Node,
    _Select,
)
from operators.graph.cel.types import (
    _ARITHMETIC,
    _EXTENSION_METHODS,
    _MACROS,
    _NAMESPACED,
    _SCALARS,
    DYN,
    LIST,
    STRING,
)

_Monomial = tuple[str, ...]


class _Poly:
    """A polynomial with non-negative coefficients in the sizes of comprehensions' elements.

    In a comprehension's body, a cost or a size may depend on the size of the element (``x.a ==
    y`` costs more for a bigger ``x``): a polynomial in that size, which summing over the range
    turns into one in the sizes of the comprehensions around it, and into a number at the top.

    >>> per_element = _Poly.symbol("x") * 3 + 1  # 1, and 3 per byte of the element
    >>> per_element.sum_over("x", count=_Poly.of(10), total=_Poly.of(100)).at(0)
    310.0
    """

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[_Monomial, float] | None = None) -> None:
        self.terms: dict[_Monomial, float] = {m: c for m, c in (terms or {}).items() if c}

    @classmethod
    def of(cls, value: float) -> _Poly:
        """The constant ``value``."""
        return cls({(): value})

    @classmethod
    def symbol(cls, name: str) -> _Poly:
        """The size called ``name``."""
        return cls({(name,): 1.0})

    def __add__(self, other: _Poly | float) -> _Poly:
        terms = dict(self.terms)
        for monomial, coefficient in _as_poly(other).terms.items():
            terms[monomial] = terms.get(monomial, 0.0) + coefficient
        return _Poly(terms)

    def __mul__(self, other: _Poly | float) -> _Poly:
        if not isinstance(other, _Poly):
            return _Poly({m: c * other for m, c in self.terms.items()})
        terms: dict[_Monomial, float] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                monomial = tuple(sorted(m1 + m2))
                terms[monomial] = terms.get(monomial, 0.0) + c1 * c2
        return _Poly(terms)

    def join(self, other: _Poly) -> _Poly:
        """A bound on both (sizes are never negative): the larger coefficient of each term."""
        terms = dict(self.terms)
        for monomial, coefficient in other.terms.items():
            terms[monomial] = max(terms.get(monomial, 0.0), coefficient)
        return _Poly(terms)

    def depends(self, name: str) -> bool:
        """Whether the value depends on the size ``name``."""
        return any(name in monomial for monomial in self.terms)

    def at(self, size: float) -> float:
        """The value when every size is ``size``."""
        return sum(c * size ** len(monomial) for monomial, c in self.terms.items())

    def sum_over(self, name: str, count: _Poly, total: _Poly) -> _Poly:
        """A bound on the sum of the value over a range's elements, ``name`` being their size.

        ``count`` bounds the number of elements and ``total`` the sum of their sizes: a term
        without ``name`` adds up ``count`` times, one in ``name**k`` to at most ``total**k``.
        """
        result = _Poly()
        for monomial, coefficient in self.terms.items():
            power = monomial.count(name)
            rest = _Poly({tuple(m for m in monomial if m != name): coefficient})
            factor = count
            if power:
                factor = total
                for _ in range(power - 1):
                    factor = factor * total
            result = result + rest * factor
        return result


def _as_poly(value: _Poly | float) -> _Poly:
    return value if isinstance(value, _Poly) else _Poly.of(value)


@dataclass(frozen=True, slots=True)
class _Estimate:
    cost: _Poly
    """A bound on the operations evaluating the node takes (see :data:`MAX_COST`)."""
    size: _Poly
    """A bound on the size of its value, in bytes of JSON: a list of size ``s`` has at most
    ``s / 2`` elements (each takes a byte and a separator), a string at most ``s`` characters."""


_SMALL: Final = _Poly.of(25.0)
"""The size of a number or a bool (an int64 has at most 20 digits, a double's repr fewer)."""

_CHARACTER: Final = 0.01
"""The cost of a character of string work outside comprehensions: copying or scanning one
takes about a hundredth of the time of an operation (cel-go charges a tenth, which would refuse
``r.a + "," + r.b + ...`` over 50 fields of a 1 MiB record: they cannot all be 1 MiB)."""


def _literal_size(value: object) -> float:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass")) + 2.0
    return float(len(repr(value)))


class _Estimator:
    """An expression's estimated cost on the largest record (see :data:`MAX_COST`).

    Walks the checked parse tree with the static types the compiler found. Variables are values
    of at most ``record_bytes``; a comprehension's element has a size of its own (a symbol of
    :class:`_Poly`), whose sum over the range is at most the range's size: so a comprehension
    over each element's own list (``r.orders.exists(o, o.items.exists(...))``) is linear in the
    record, and one over a list that does not depend on the element is not. Inside
    comprehensions, per-character string work is left to the step count at run time: bounded
    here, one string of the record per element would make ``r.tags.map(t, r.id + t)``
    quadratic.
    """

    def __init__(self, compiler: _Compiler, record_bytes: int) -> None:
        self.types = compiler.types
        self.deferred = compiler.deferred
        self.programs = compiler.programs
        self.max_steps = compiler.max_steps
        self.bound = float(record_bytes)
        self.scope: dict[str, _Poly] = {name: _Poly.of(self.bound) for name in compiler.variables}
        self.loops: list[str] = []
        self.heaviest = (0.0, 0)
        """The cost and position of the costliest comprehension not inside another."""

    def total(self, tree: _Node) -> float:
        """The estimated cost of the whole expression."""
        return self.estimate(tree).cost.at(self.bound)

    def type(self, node: _Node) -> str:
        return self.types.get(id(node), DYN)

    def characters(self, size: _Poly) -> _Poly:
        """The cost of reading or writing a string of ``size``: nothing inside comprehensions."""
        return _Poly() if self.loops else size * _CHARACTER

    def least(self, a: _Poly, b: _Poly) -> _Poly:
        """A bound on the smaller of two sizes.

        Either is one. Summed over a range, one that depends on the element is the better
        (the elements' sizes add up to the range's), unless the other is no bigger than its
        part that does not depend on the element (``r.id + t == "x"``).
        """
        if self.loops:
            inner = self.loops[-1]
            if a.depends(inner) != b.depends(inner):
                dependent, other = (a, b) if a.depends(inner) else (b, a)
                fixed = _Poly({m: c for m, c in dependent.terms.items() if inner not in m})
                return other if other.at(self.bound) <= fixed.at(self.bound) else dependent
        return a if a.at(self.bound) <= b.at(self.bound) else b

    def estimate(self, node: _Node) -> _Estimate:
        if id(node) in self.deferred:  # unchecked and ill-typed: raises, evaluating nothing
            return _Estimate(_Poly.of(1), _SMALL)
        if isinstance(node, _Lit):
            return _Estimate(_Poly.of(1), _Poly.of(_literal_size(node.value)))
        if isinstance(node, _Ident):
            return _Estimate(_Poly.of(1), self.scope[node.name])
        if isinstance(node, _Call):
            return self.call(node)
        if isinstance(node, _Binary):
            return self.binary(node)
        parts = [self.estimate(child) for child in _children(node)]
        cost = sum((part.cost for part in parts), _Poly.of(1))
        if isinstance(node, _Select | _Index):
            return _Estimate(cost, parts[0].size)
        if isinstance(node, _Cond):
            return _Estimate(cost, parts[1].size.join(parts[2].size))
        if isinstance(node, _List):
            return _Estimate(cost, sum((part.size + 1 for part in parts), _Poly.of(1)))
        if isinstance(node, _Map):
            return _Estimate(cost, sum((part.size + 1 for part in parts), _Poly.of(1)))
        return _Estimate(cost, _SMALL)  # _Unary, _Logic

    def call(self, node: _Call) -> _Estimate:
        name = node.name
        if node.target is None:
            if name == "has":
                assert isinstance(node.args[0], _Select)
                return _Estimate(self.estimate(node.args[0].operand).cost + 1, _SMALL)
            if name == "matches":
                return self.matches(node.args[0], node.args[1])
            if name in _NAMESPACED:
                args = [self.estimate(arg) for arg in node.args]
                cost = sum((arg.cost for arg in args), _Poly.of(1))
                if name == "strings.quote":  # each character escaped at most into two
                    size = args[0].size * 2 + 2
                    return _Estimate(cost + self.characters(size), size)
                return _Estimate(cost + sum((arg.size for arg in args), _Poly.of(0)), _SMALL)
            return self.function(name, node.args[0])
        if name in _MACROS:
            return self.macro(node)
        if name == "size":
            return self.function(name, node.target)
        if name == "matches":
            return self.matches(node.target, node.args[0])
        receiver = self.estimate(node.target)
        args = [self.estimate(arg) for arg in node.args]
        cost = sum((arg.cost for arg in args), receiver.cost + 1)
        if name in ("lower", "upper"):  # a character's upper case may be three
            return _Estimate(cost + self.characters(receiver.size), receiver.size * 3)
        if name in _EXTENSION_METHODS:
            return self.extension(name, cost, receiver, args)
        if name == "contains":
            return _Estimate(cost + self.characters(receiver.size), _SMALL)
        read = self.least(receiver.size, args[0].size)  # startsWith, endsWith
        return _Estimate(cost + self.characters(read), _SMALL)

    def extension(
        self, name: str, cost: _Poly, receiver: _Estimate, args: list[_Estimate]
    ) -> _Estimate:
        """A method of the strings extension: reads its receiver, makes a string (or list).

        The size of what it makes is bounded as each says.
        """
        size = receiver.size
        if name == "replace":  # the new string at most once per character, and once more
            size = receiver.size + (receiver.size + 1) * args[1].size
        elif name == "split":  # a list of up to one (empty) string per character, and one
            size = receiver.size * 2 + 2
        elif name == "join":  # the elements, with a separator between two
            size = receiver.size * ((args[0].size if args else _Poly.of(0)) + 1)
        elif name == "format":  # each argument's text (a character's %x is 8 digits), once,
            # and a number's (up to MAX_PRECISION digits) per clause of the template
            size = receiver.size * (_MAX_PRECISION + 2) + args[0].size * 8
        elif name in ("charAt", "indexOf", "lastIndexOf"):
            size = _SMALL
        return _Estimate(cost + self.characters(receiver.size + size), size)

    def function(self, name: str, node: _Node) -> _Estimate:
        arg = self.estimate(node)
        if name == "dyn":
            return arg
        cost = arg.cost + 1
        textual = self.type(node) in (STRING, DYN)
        if name == "string":
            return _Estimate(cost, arg.size if textual else _SMALL)
        if name != "size" and textual:
            cost = cost + self.characters(arg.size)
        return _Estimate(cost, _SMALL)

    def matches(self, subject_node: _Node, pattern_node: _Node) -> _Estimate:
        subject = self.estimate(subject_node)
        pattern = self.estimate(pattern_node)
        cost = subject.cost + pattern.cost + 1
        if not self.loops:  # inside comprehensions, counted at run time
            program = self.programs.get(id(pattern_node))
            search = float(self.max_steps)  # the most one search may take
            if program is not None:
                search = min(search, subject.size.at(self.bound) * program / _REGEX_COST_DIVISOR)
            cost = cost + search
        return _Estimate(cost, _SMALL)

    def binary(self, node: _Binary) -> _Estimate:
        left, right = self.estimate(node.left), self.estimate(node.right)
        cost = left.cost + right.cost + 1
        op = node.op
        if op in _ARITHMETIC:
            if op == "+" and self.type(node) in (STRING, LIST, DYN):
                size = left.size + right.size
                return _Estimate(cost + self.characters(size), size)
            return _Estimate(cost, _SMALL)
        if op == "in":
            # every element visited and compared (for a map, its keys; an upper bound)
            return _Estimate(cost + right.size, _SMALL)
        if self.type(node.left) not in _SCALARS and self.type(node.right) not in _SCALARS:
            # == on lists and maps visits their elements, on strings their characters
            cost = cost + self.least(left.size, right.size) * 0.5
        return _Estimate(cost, _SMALL)

    def macro(self, node: _Call) -> _Estimate:
        assert node.target is not None
        target = self.estimate(node.target)
        variable = node.args[0]
        assert isinstance(variable, _Ident)
        symbol = f"x{len(self.loops)}"
        outer = self.scope.get(variable.name)
        self.scope[variable.name] = _Poly.symbol(symbol)
        self.loops.append(symbol)
        try:
            parts = [self.estimate(arg) for arg in node.args[1:]]
        finally:
            self.loops.pop()
            if outer is None:
                del self.scope[variable.name]
            else:
                self.scope[variable.name] = outer
        count = target.size * 0.5
        per_element = sum((part.cost for part in parts), _Poly.of(1))
        cost = target.cost + 1 + per_element.sum_over(symbol, count, target.size)
        if node.name == "map":
            size = (parts[-1].size + 1).sum_over(symbol, count, target.size) + 1
        elif node.name == "filter":
            size = target.size
        else:
            size = _SMALL
        if not self.loops:
            value = cost.at(self.bound)
            if value > self.heaviest[0]:
                self.heaviest = (value, node.pos)
        return _Estimate(cost, size)


# --------------------------------------------------------------------------- run-time helpers
