"""The parse tree and the parser (a recursive descent, precedence as in the CEL spec)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, NoReturn, TypeVar

from operators.graph.cel.core import ExpressionError
from operators.graph.cel.lexer import _Token
from operators.graph.cel.types import (
    _MACROS,
    _NAMESPACED,
    BOOL,
    DOUBLE,
    INT,
    INT64_MAX,
    INT64_MIN,
    NULL,
    STRING,
    UINT,
)


@dataclass(slots=True)
class _Node:
    pos: int
    """Where to point in messages: the literal, name, operator or method name."""
    depth: int = field(default=1, kw_only=True)


@dataclass(slots=True)
class _Lit(_Node):
    value: object
    type: str


@dataclass(slots=True)
class _Ident(_Node):
    name: str


@dataclass(slots=True)
class _Select(_Node):
    operand: _Node
    name: str


@dataclass(slots=True)
class _Index(_Node):
    operand: _Node
    index: _Node


@dataclass(slots=True)
class _Call(_Node):
    name: str
    target: _Node | None
    args: list[_Node]


@dataclass(slots=True)
class _Unary(_Node):
    op: str
    operand: _Node


@dataclass(slots=True)
class _Binary(_Node):
    op: str
    left: _Node
    right: _Node


@dataclass(slots=True)
class _Logic(_Node):
    op: str
    operands: list[_Node]
    positions: list[int]
    """The position of each operator (one fewer than the operands)."""


@dataclass(slots=True)
class _Cond(_Node):
    cond: _Node
    then: _Node
    orelse: _Node


@dataclass(slots=True)
class _List(_Node):
    items: list[_Node]


@dataclass(slots=True)
class _Map(_Node):
    keys: list[_Node]
    values: list[_Node]


def _children(node: _Node) -> list[_Node]:
    if isinstance(node, _Select | _Unary):
        return [node.operand]
    if isinstance(node, _Index):
        return [node.operand, node.index]
    if isinstance(node, _Call):
        return ([node.target] if node.target is not None else []) + node.args
    if isinstance(node, _Binary):
        return [node.left, node.right]
    if isinstance(node, _Logic):
        return node.operands
    if isinstance(node, _Cond):
        return [node.cond, node.then, node.orelse]
    if isinstance(node, _List):
        return node.items
    if isinstance(node, _Map):
        return node.keys + node.values
    return []


def _is_macro(node: _Node) -> bool:
    """Whether ``node`` is a comprehension (a macro called as a method)."""
    return isinstance(node, _Call) and node.target is not None and node.name in _MACROS


def _mentions(node: _Node, name: str) -> bool:
    """Whether ``node`` reads the variable ``name`` (not one of a comprehension's, shadowing it).

    >>> from operators.graph.cel.lexer import _Lexer
    >>> tree = _Parser("r.a.map(r, r + x)", _Lexer("r.a.map(r, r + x)").tokens(), 48, 99).parse()
    >>> _mentions(tree, "r"), _mentions(tree, "x"), _mentions(tree, "y")
    (True, True, False)
    """
    if isinstance(node, _Ident):
        return node.name == name
    if _is_macro(node):
        assert isinstance(node, _Call) and node.target is not None
        variable = node.args[0] if node.args else None
        if isinstance(variable, _Ident) and variable.name == name:
            return _mentions(node.target, name)
    return any(_mentions(child, name) for child in _children(node))


def _nodes_per_run(node: _Node) -> int:
    """The nodes evaluated (at most) each time ``node`` is, but a comprehension's body's.

    A comprehension nested in ``node`` pays for its body itself, per element, when it starts.
    """
    if _is_macro(node):
        assert isinstance(node, _Call) and node.target is not None
        return 1 + _nodes_per_run(node.target)
    return 1 + sum(_nodes_per_run(child) for child in _children(node))


# --------------------------------------------------------------------------- parser

_N = TypeVar("_N", bound=_Node)

_RELATIONS: Final = frozenset({"<", "<=", ">", ">=", "==", "!=", "in"})
_LITERAL_TYPES: Final = {
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bool": BOOL,
    "null": NULL,
}


class _Parser:
    def __init__(self, source: str, tokens: list[_Token], max_depth: int, max_nodes: int) -> None:
        self.source = source
        self.tokens = tokens
        self.i = 0
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.nodes = 0
        self.nesting = 0

    # -- helpers

    def fail(self, message: str, pos: int) -> NoReturn:
        raise ExpressionError(message, pos, self.source)

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, op: str) -> bool:
        token = self.tokens[self.i]
        return token.kind == "op" and token.text == op

    def advance(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind != "eof":
            self.i += 1
        return token

    def unexpected(self, token: _Token) -> NoReturn:
        if token.kind == "eof":
            self.fail("unexpected end of expression", token.pos)
        self.fail(f"unexpected token {token.text!r}", token.pos)

    def expect(self, op: str) -> _Token:
        token = self.tokens[self.i]
        if not (token.kind == "op" and token.text == op):
            found = "end of expression" if token.kind == "eof" else repr(token.text)
            self.fail(f"expected {op!r}, found {found}", token.pos)
        return self.advance()

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > self.max_depth:
            self.fail(f"expression nested too deeply (more than {self.max_depth} levels)", pos)

    def leave(self) -> None:
        self.nesting -= 1

    def make(self, node: _N, count: int = 1) -> _N:
        self.nodes += count
        if self.nodes > self.max_nodes:
            self.fail(f"expression too large (more than {self.max_nodes} nodes)", node.pos)
        children = _children(node)
        node.depth = 1 + max((child.depth for child in children), default=0)
        if node.depth > self.max_depth:
            self.fail(f"expression nested too deeply (more than {self.max_depth} levels)", node.pos)
        return node

    # -- grammar

    def parse(self) -> _Node:
        node = self.expr()
        token = self.peek()
        if token.kind != "eof":
            self.unexpected(token)
        return node

    def expr(self) -> _Node:
        cond = self.logic("||")
        if not self.at("?"):
            return cond
        question = self.advance()
        self.enter(question.pos)
        then = self.logic("||")
        self.expect(":")
        orelse = self.expr()
        self.leave()
        return self.make(_Cond(question.pos, cond, then, orelse))

    def logic(self, op: str) -> _Node:
        parse_operand: Callable[[], _Node] = (
            (lambda: self.logic("&&")) if op == "||" else self.relation
        )
        first = parse_operand()
        if not self.at(op):
            return first
        operands, positions = [first], []
        while self.at(op):
            positions.append(self.advance().pos)
            operands.append(parse_operand())
        return self.make(_Logic(positions[0], op, operands, positions), count=len(positions))

    def relation(self) -> _Node:
        node = self.addition()
        while (token := self.peek()).kind == "op" and token.text in _RELATIONS:
            self.advance()
            node = self.make(_Binary(token.pos, token.text, node, self.addition()))
        return node

    def addition(self) -> _Node:
        node = self.multiplication()
        while (token := self.peek()).kind == "op" and token.text in ("+", "-"):
            self.advance()
            node = self.make(_Binary(token.pos, token.text, node, self.multiplication()))
        return node

    def multiplication(self) -> _Node:
        node = self.unary()
        while (token := self.peek()).kind == "op" and token.text in ("*", "/", "%"):
            self.advance()
            node = self.make(_Binary(token.pos, token.text, node, self.unary()))
        return node

    def unary(self) -> _Node:
        token = self.peek()
        if not (token.kind == "op" and token.text in ("!", "-")):
            return self.member()
        ops: list[_Token] = []
        while self.at(token.text):
            ops.append(self.advance())
        operand: _Node | None = None
        if token.text == "-":
            operand = self.negative_literal()
            if operand is not None:
                ops.pop()
        if operand is None:
            operand = self.member()
        for op in reversed(ops):
            operand = self.make(_Unary(op.pos, op.text, operand))
        return operand

    def negative_literal(self) -> _Node | None:
        """Fold ``-`` into a number right after it, so ``-9223372036854775808`` is an int."""
        token, after = self.peek(), self.peek(1)
        if token.kind not in ("int", "double") or (after.kind == "op" and after.text in (".", "[")):
            return None
        minus = self.tokens[self.i - 1]
        self.advance()
        assert isinstance(token.value, int | float)
        value = -token.value
        if token.kind == "int" and not INT64_MIN <= value <= INT64_MAX:
            self.fail(f"int literal out of range: -{token.text}", minus.pos)
        return self.make(_Lit(minus.pos, value, INT if token.kind == "int" else DOUBLE))

    def member(self) -> _Node:
        node = self.primary()
        while True:
            token = self.peek()
            if token.kind != "op":
                return node
            if token.text == ".":
                self.advance()
                name = self.advance()
                # A field or method name may be a reserved word (the spec's SELECTOR), not
                # true, false, null or in.
                if name.kind not in ("ident", "reserved", "quoted"):
                    self.unexpected(name)
                assert isinstance(name.value, str)
                if name.kind == "quoted" and self.at("("):
                    self.fail("a backquoted name cannot be a method's", name.pos)
                qualified = f"{node.name}.{name.value}" if isinstance(node, _Ident) else ""
                if self.at("(") and qualified in _NAMESPACED:  # math.greatest(...)
                    node = self.make(_Call(node.pos, qualified, None, self.arguments()))
                elif self.at("("):
                    node = self.make(_Call(name.pos, name.value, node, self.arguments()))
                else:
                    node = self.make(_Select(name.pos, node, name.value))
            elif token.text == "[":
                self.advance()
                self.enter(token.pos)
                index = self.expr()
                self.expect("]")
                self.leave()
                node = self.make(_Index(token.pos, node, index))
            else:
                return node

    def arguments(self) -> list[_Node]:
        opening = self.expect("(")
        self.enter(opening.pos)
        args: list[_Node] = []
        if not self.at(")"):
            args.append(self.expr())
            while self.at(","):
                self.advance()
                args.append(self.expr())
        self.expect(")")
        self.leave()
        return args

    def primary(self) -> _Node:
        token = self.advance()
        kind = token.kind
        if kind == "int":
            assert isinstance(token.value, int)
            if token.value > INT64_MAX:
                self.fail(f"int literal out of range: {token.text}", token.pos)
            return self.make(_Lit(token.pos, token.value, INT))
        if kind in ("uint", "double", "string", "bool", "null"):
            return self.make(_Lit(token.pos, token.value, _LITERAL_TYPES[kind]))
        if kind == "ident":
            assert isinstance(token.value, str)
            if self.at("("):
                return self.make(_Call(token.pos, token.value, None, self.arguments()))
            return self.make(_Ident(token.pos, token.value))
        if kind == "reserved":
            self.fail(f"reserved word {token.text!r} cannot be used as an identifier", token.pos)
        if kind == "op" and token.text == "(":
            self.enter(token.pos)
            node = self.expr()
            self.expect(")")
            self.leave()
            return node
        if kind == "op" and token.text == "[":
            self.enter(token.pos)
            items: list[_Node] = []
            while not self.at("]"):
                items.append(self.expr())
                if not self.at("]"):
                    self.expect(",")
            self.advance()
            self.leave()
            return self.make(_List(token.pos, items))
        if kind == "op" and token.text == "{":
            self.enter(token.pos)
            keys: list[_Node] = []
            values: list[_Node] = []
            while not self.at("}"):
                keys.append(self.expr())
                self.expect(":")
                values.append(self.expr())
                if not self.at("}"):
                    self.expect(",")
            self.advance()
            self.leave()
            return self.make(_Map(token.pos, keys, values))
        self.unexpected(token)


# --------------------------------------------------------------------------- code generation
