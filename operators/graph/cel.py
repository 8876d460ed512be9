r"""Expressions in CEL syntax, checked once at submission and compiled to Python functions.

A graph's record logic (``r.value * 2 > 10 && r.key != "x"``) is written in a subset of the
Common Expression Language. :func:`compile_expression` lexes, parses and type-checks the source
once, then builds a Python :mod:`ast` from its own parse tree (never from user text), compiles
it and evaluates it with no builtins: the result is a plain function, so nothing interprets the
expression per record and nothing the client wrote is ever executed.

>>> expression = compile_expression('r.value * 2 > 10 && r.key != "x"')
>>> expression.fn({"value": 6, "key": "y"}), expression.fn({"value": 5, "key": "y"})
(True, False)
>>> compile_expression("xs.filter(x, x % 2 == 1).map(x, x * x)", ["xs"]).fn([1, 2, 3])
[1, 9]
>>> try:
...     compile_expression("r.value )")
... except ExpressionError as error:
...     print(error)
line 1, column 9: unexpected token ')'

**Grammar** (precedence from loosest to tightest, as in the CEL spec): ``c ? a : b``;
``||``; ``&&``; ``== != < <= > >= in``; ``+ -``; ``* / %``; unary ``!`` and ``-``; member
selection ``a.f``, indexing ``a[i]``, calls ``f(x)`` and methods ``x.f(y)``. Literals: ints
(``42``, ``0x2A``), uints (``42u``), doubles (``1.5``, ``.5``, ``1e3``), strings in single or
double quotes, triple-quoted, raw (``r"\d"``), with the escapes ``\n \t \\ \" \' \uXXXX``
(all of CEL's: ``\a \b \f \r \v \? \` \xHH \UXXXXXXXX \ooo`` too), ``true``,
``false``, ``null``, lists ``[a, b]`` and maps ``{"k": v}``. Comments run from ``//`` to the
end of the line.

**Functions**: ``size(x)``/``x.size()``, ``int(x)``, ``uint(x)``, ``double(x)``,
``string(x)``, ``dyn(x)``, ``has(a.f)``; string methods ``startsWith``, ``endsWith``,
``contains``, ``matches`` (RE2 syntax and semantics, as CEL specifies, searched for anywhere in
the string; RE2's time is linear in the string: a literal pattern is compiled once, at
submission, any other when evaluated, through a bounded cache), and the extensions ``lower()``
and ``upper()`` (not standard CEL). Macros on lists (and on maps, whose keys they range over):
``all``, ``exists``, ``exists_one``, ``map`` (two and three argument forms) and ``filter``,
e.g. ``xs.map(x, x * 2)``.

**Values**: records are what JSON decodes to: ``int``, ``float`` (CEL ``double``), ``str``,
``bool``, ``None`` (``null``), ``list`` and ``dict`` (CEL ``map``); tuples are taken as lists.
``r.f`` on a map is the lookup of key ``"f"``. The static types of literals and operators are
checked at submission; values read from records are ``dyn`` and checked when evaluated.

**Semantics** follow CEL, with these choices:

* Arithmetic needs operands of one type, as in CEL: ``1 + 2.0`` does not compile and
  ``r.x * 2`` fails on a record whose ``x`` is a double. ``int`` results are checked against
  the int64 range after every ``+``, ``-``, ``*``, ``/`` and unary ``-`` (``uint`` against the
  uint64 range) and raise ``integer overflow``. ``/`` and ``%`` on ints truncate toward zero
  (``-7 / 2 == -3``, ``-7 % 2 == -1``); ``/`` on doubles follows IEEE 754 (``1.0 / 0.0`` is
  infinity); there is no ``%`` on doubles.
* Ordering compares ints, uints and doubles numerically across types, strings by code point
  and bools (``false < true``); anything else is an error. Equality is CEL's heterogeneous
  equality: values of different types are unequal except numbers, which compare by value;
  lists and maps compare element by element.
* ``&&``, ``||`` and ``?:`` evaluate left to right and short-circuit; their operands must be
  bools. CEL's rule that ``error && false`` is ``false`` (errors absorbed from either side) is
  not implemented: an error on the left is raised. ``all``/``exists`` likewise stop at the
  first element that decides them and raise the first error they meet.
* uints are Python ints whose type is known statically; a uint read from a record (there are
  none in JSON) or passed through a list is an int.
* ``matches`` is RE2's: no backreferences or lookaround (a literal pattern using them does not
  compile), ``\z`` for the end of the text (Python's ``\Z``), ``$`` only at the end of the text
  (not before a final newline), ``\d``, ``\w``, ``\s`` and ``\b`` ASCII-only, repetitions
  up to 1000. A pattern that is not a literal and does not compile fails the record.

**Budget**: an expression is refused at submission if its estimated cost on the largest record
(:data:`MAX_RECORD_BYTES`) is over ``max_cost`` (:data:`MAX_COST`): comprehensions multiply
their body's cost by their range's size, so one over a record's list nested in another over a
record's list is refused, while one over each element's own list is not. When evaluated, the
work that can multiply (comprehensions nested in others, and work in a comprehension's body on
values that do not depend on the element) is counted per record, and a record that needs more
than ``max_steps`` (:data:`MAX_STEPS`) fails with :class:`EvaluationError`, as any record the
expression fails on; so does a ``matches`` that would cost more on its own.

Not supported: bytes literals, timestamps and durations, ``type()``, protobuf messages and
message construction, the optional syntax (``r.?f``), qualified names and the leading-dot
root selection (``.r``), and the string extensions beyond ``lower``/``upper``. Maps do not
tell the keys ``1`` and ``true`` apart (Python's dicts do not).
"""

from __future__ import annotations

import ast
import copy
import functools
import keyword
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, NoReturn, TypeVar, cast

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = [
    "BATCH_SHAPES",
    "MAX_COST",
    "MAX_RECORD_BYTES",
    "MAX_STEPS",
    "EvaluationError",
    "Expression",
    "ExpressionError",
    "compile_expression",
    "hashable",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1

MAX_RECORD_BYTES: Final = 1 << 20
"""The largest record the cost estimate assumes, in bytes of JSON: the server refuses larger
records where they arrive (its ``max_record_bytes``), so a list read from a record has at most
512 Ki elements and a string at most 1 Mi characters."""

MAX_COST: Final = 100_000_000
"""The most an expression's estimated cost on a record of :data:`MAX_RECORD_BYTES` may be.

The cost counts operations: one per node of the expression evaluated, a comprehension's range
times the cost of its body, the elements ``in`` and ``==`` visit on lists and maps, and a
hundredth per character of string work outside comprehensions (inside, it is counted at run
time: see :data:`MAX_STEPS`). Every expression that is linear in its
record (a comprehension over a list, chains of them, comprehensions over the elements'
own lists) stays far below it for bodies of ordinary size; any comprehension over a record's
list nested in another over a record's list (512 Ki x 512 Ki) is far above it.
"""

MAX_STEPS: Final = 10_000_000
"""The most steps evaluating an expression may take on one record; a record that needs more
fails (as any record on which its expression fails: dropped and counted, or the dataflow fails).

Counted, what can multiply:

* a comprehension nested in another, as it starts: its range's size times the nodes of its body
  (a call of a helper counting 5), unless its range has at most 16 elements;
* in a comprehension's body, work on a value that does not depend on the element, done again
  for every element: copied by ``+``, read by ``contains``, ``lower``, ``upper``, ``int()``
  (and ``startsWith``, ``endsWith``, ``<``... when the other side does not depend on it
  either), visited by ``in`` and ``==`` (lists and maps). The comprehension evaluates the value
  as it starts and pays for every element at once: a tenth of a step per character (or per
  element of a list copied), one per element visited, all levels down; under 2,560 characters
  in all, nothing;
* ``matches``: its string's bytes times its pattern's RE2 program size, divided by
  :data:`_REGEX_COST_DIVISOR`, before searching.

A comprehension not nested in another pays for its own on its own (no counter per record is
kept when nothing else is counted). Not counted: what runs once per record outside any
comprehension, comprehensions that are not nested, and work on what depends on the element:
all of it is linear in the record, and the estimate bounds it at submission.
"""


# --------------------------------------------------------------------------- errors and results


class ExpressionError(ValueError):
    """An expression that does not compile, and where in its source the problem is.

    ``str()`` gives ``"line L, column C: message"`` (both counted from 1).

    Attributes:
        message: What is wrong, without the location.
        position: The 0-based offset of the problem in ``source``.
        source: The expression's source text.
    """

    def __init__(self, message: str, position: int, source: str) -> None:
        super().__init__(message, position, source)
        self.message = message
        self.position = position
        self.source = source

    @property
    def line(self) -> int:
        """The 1-based line of :attr:`position`."""
        return self.source.count("\n", 0, self.position) + 1

    @property
    def column(self) -> int:
        """The 1-based column (in characters) of :attr:`position` on its line."""
        return self.position - (self.source.rfind("\n", 0, self.position) + 1) + 1

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"


class EvaluationError(ValueError):
    """An expression that failed on a record: a missing key, a wrong type, a division by zero."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled expression.

    Attributes:
        source: The expression as submitted.
        variables: The names the expression may use, in the order ``fn`` takes them.
        fn: The compiled function: ``fn(*values)`` with one value per variable. It raises
            :class:`EvaluationError` when the expression fails on its arguments.
        python: The generated Python source, for diagnostics and ``dry_run`` plans.
        result_type: The CEL type of the result as far as it is known at submission: ``bool``,
            ``int``, ``uint``, ``double``, ``string``, ``null_type``, ``list``, ``map`` or
            ``dyn`` (known only when evaluated).
        batch: The batch forms asked for (see :data:`BATCH_SHAPES`), by shape: each takes a
            list of values of the first variable (then the other variables' values, fixed for
            the batch) and evaluates the expression for all of them in one comprehension, with
            no Python call per value. It raises :class:`EvaluationError` at the first value
            the expression fails on; what the others gave is then lost, so a caller that
            drops failures evaluates the batch again value by value with ``fn``.
        cost: The estimated cost of evaluating the expression on the largest record (see
            :data:`MAX_COST`).
    """

    source: str
    variables: tuple[str, ...]
    fn: Callable[..., Any]
    python: str
    result_type: str
    batch: Mapping[str, Callable[..., list[Any]]] = field(default_factory=dict)
    cost: float = 0.0


BATCH_SHAPES: Final = ("map", "filter", "key", "pairs")
"""The batch forms :func:`compile_expression` can add, for ``e`` over values ``v``:

* ``map``: ``[e(v) for v in values]``;
* ``filter``: the values for which ``e(v)`` is ``true`` (it must be a bool);
* ``key``: ``[k(e(v)) for v in values]``, where ``k`` makes a key that can be hashed: lists
  become tuples (recursively) and a map is an error (``a key cannot be a map``);
* ``pairs``: ``[(k(e(v)), v) for v in values]``.

>>> double = compile_expression("r * 2", batch=("map",))
>>> double.batch["map"]([1, 2, 3])
[2, 4, 6]
>>> compile_expression("r.k", batch=("pairs",)).batch["pairs"]([{"k": [1, 2]}])
[((1, 2), {'k': [1, 2]})]
"""

# --------------------------------------------------------------------------- types

INT: Final = "int"
UINT: Final = "uint"
DOUBLE: Final = "double"
STRING: Final = "string"
BOOL: Final = "bool"
NULL: Final = "null_type"
LIST: Final = "list"
MAP: Final = "map"
DYN: Final = "dyn"

_NUMERIC: Final = frozenset({INT, UINT, DOUBLE})
_SCALARS: Final = frozenset({INT, UINT, DOUBLE, BOOL, NULL})
"""Types whose values compare in constant time."""
_ORDERED: Final = frozenset({INT, UINT, DOUBLE, STRING, BOOL})
_PY_TYPE: Final = {
    INT: "_int",
    UINT: "_int",
    DOUBLE: "_float",
    STRING: "_str",
    BOOL: "_bool",
    LIST: "_list",
    MAP: "_dict",
}
"""The global naming the Python type of each static type's values."""

_ARITHMETIC: Final = {
    "+": frozenset({INT, UINT, DOUBLE, STRING, LIST}),
    "-": frozenset({INT, UINT, DOUBLE}),
    "*": frozenset({INT, UINT, DOUBLE}),
    "/": frozenset({INT, UINT, DOUBLE}),
    "%": frozenset({INT, UINT}),
}
"""For each arithmetic operator, the types T for which ``T op T`` exists (and gives a T)."""

_PY_BINOP: Final[dict[str, Callable[[], ast.operator]]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
}
_PY_CMPOP: Final[dict[str, Callable[[], ast.cmpop]]] = {
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "==": ast.Eq,
    "!=": ast.NotEq,
}

# --------------------------------------------------------------------------- lexer

_RESERVED: Final = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_OPERATORS: Final = tuple(
    [
        "==",
        "!=",
        "<=",
        ">=",
        "&&",
        "||",
        "<",
        ">",
        "!",
        "+",
        "-",
        "*",
        "/",
        "%",
        "?",
        ":",
        ".",
        ",",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
    ]
)
"""Two-character operators first, so that ``<=`` is not lexed as ``<`` then ``=``."""
_SPACE = re.compile(r"(?:[ \t\n\r\f]+|//[^\r\n]*)+")
_WORD = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[uU]?"
    r"|(?:[0-9]+\.[0-9]+|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+"
    r"|[0-9]+[uU]?"
)
_STRING_PREFIXES: Final = frozenset(
    ["r", "R", "b", "B", "rb", "rB", "Rb", "RB", "br", "bR", "Br", "BR"]
)
_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "?": "?",
    '"': '"',
    "'": "'",
    "`": "`",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """``int``, ``uint``, ``double``, ``string``, ``bool``, ``null``, ``ident``, ``op`` or
    ``eof``."""
    text: str
    value: object
    pos: int


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str, pos: int) -> NoReturn:
        raise ExpressionError(message, pos, self.source)

    def tokens(self) -> list[_Token]:
        source = self.source
        tokens: list[_Token] = []
        i, n = 0, len(source)
        while True:
            space = _SPACE.match(source, i)
            if space is not None:
                i = space.end()
            if i >= n:
                tokens.append(_Token("eof", "", None, n))
                return tokens
            char = source[i]
            if char in _DIGITS or (char == "." and source[i + 1 : i + 2] in _DIGITS):
                token, i = self.number(i)
            elif (word := _WORD.match(source, i)) is not None:
                text = word.group()
                if text in _STRING_PREFIXES and source[word.end() : word.end() + 1] in ('"', "'"):
                    if "b" in text or "B" in text:
                        self.fail("bytes literals are not supported", i)
                    token, i = self.string(i, word.end(), raw=True)
                else:
                    token, i = self.word(text, i), word.end()
            elif char in "\"'":
                token, i = self.string(i, i, raw=False)
            else:
                for op in _OPERATORS:
                    if source.startswith(op, i):
                        token, i = _Token("op", op, op, i), i + len(op)
                        break
                else:
                    self.fail(f"unexpected character {char!r}", i)
            tokens.append(token)

    def word(self, text: str, pos: int) -> _Token:
        if text in ("true", "false"):
            return _Token("bool", text, text == "true", pos)
        if text == "null":
            return _Token("null", text, None, pos)
        if text == "in":
            return _Token("op", text, text, pos)
        if text in _RESERVED:
            self.fail(f"reserved word {text!r} cannot be used as an identifier", pos)
        return _Token("ident", text, text, pos)

    def number(self, pos: int) -> tuple[_Token, int]:
        match = _NUMBER.match(self.source, pos)
        if match is None:  # pragma: no cover - the caller saw a digit
            self.fail("invalid number", pos)
        text = match.group()
        end = match.end()
        if text[:2] in ("0x", "0X"):
            unsigned = text[-1] in "uU"
            value = int(text[2 : -1 if unsigned else None], 16)
        elif any(c in text for c in ".eE"):
            number = float(text)
            if math.isinf(number):
                self.fail(f"double literal out of range: {text}", pos)
            return _Token("double", text, number, pos), end
        else:
            unsigned = text[-1] in "uU"
            value = int(text[:-1] if unsigned else text)
        if unsigned:
            if value > UINT64_MAX:
                self.fail(f"uint literal out of range: {text}", pos)
            return _Token("uint", text, value, pos), end
        return _Token("int", text, value, pos), end

    def string(self, start: int, quote: int, *, raw: bool) -> tuple[_Token, int]:
        """Lex the string literal whose prefix starts at ``start`` and quote at ``quote``."""
        source, n = self.source, len(self.source)
        char = source[quote]
        delimiter = char * 3 if source.startswith(char * 3, quote) else char
        i = quote + len(delimiter)
        chars: list[str] = []
        while True:
            if i >= n:
                self.fail("unterminated string literal", start)
            if source.startswith(delimiter, i):
                i += len(delimiter)
                break
            c = source[i]
            if c in "\r\n" and len(delimiter) == 1:
                self.fail("unterminated string literal", start)
            if c == "\\" and not raw:
                decoded, i = self.escape(i)
                chars.append(decoded)
            else:
                chars.append(c)
                i += 1
        return _Token("string", source[start:i], "".join(chars), start), i

    def escape(self, pos: int) -> tuple[str, int]:
        """Decode the escape sequence at ``pos`` (a backslash); return it and where it ends."""
        source = self.source
        kind = source[pos + 1 : pos + 2]
        if kind in _ESCAPES:
            return _ESCAPES[kind], pos + 2
        digits = {"x": 2, "X": 2, "u": 4, "U": 8}.get(kind)
        if digits is not None:
            text = source[pos + 2 : pos + 2 + digits]
            if len(text) < digits or not set(text) <= _HEX:
                self.fail(f"invalid escape sequence: \\{kind} needs {digits} hex digits", pos)
            code = int(text, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                self.fail(f"invalid code point in escape sequence: \\{kind}{text}", pos)
            return chr(code), pos + 2 + digits
        if kind in "0123" and kind:
            text = source[pos + 1 : pos + 4]
            if len(text) == 3 and set(text[1:]) <= set("01234567"):
                return chr(int(text, 8)), pos + 4
            self.fail("invalid escape sequence: an octal escape needs 3 digits", pos)
        if not kind:
            self.fail("invalid escape sequence at the end of the expression", pos)
        shown = kind if kind.isprintable() else repr(kind)[1:-1]
        self.fail(f"invalid escape sequence '\\{shown}'", pos)


# --------------------------------------------------------------------------- parse tree


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
                if name.kind != "ident":
                    self.unexpected(name)
                assert isinstance(name.value, str)
                if self.at("("):
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


_FUNCTIONS: Final = {"size": 1, "int": 1, "uint": 1, "double": 1, "string": 1, "dyn": 1}
_METHODS: Final = {
    "size": 0,
    "startsWith": 1,
    "endsWith": 1,
    "contains": 1,
    "matches": 1,
    "lower": 0,
    "upper": 0,
}
_MACROS: Final = {"all": (2,), "exists": (2,), "exists_one": (2,), "map": (2, 3), "filter": (2,)}
_CONVERSIONS: Final = {
    # name: (result type, the argument types it accepts)
    "int": (INT, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "uint": (UINT, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "double": (DOUBLE, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "string": (STRING, frozenset({INT, UINT, DOUBLE, STRING, BOOL, DYN})),
}


def _translating(value: ast.expr) -> ast.Try:
    """``return value``, with Python's exceptions turned into :class:`EvaluationError`."""
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


@dataclass(slots=True)
class _Frame:
    """A comprehension's function being compiled."""

    items: str
    """The local naming its range (when it needs one)."""
    probes: list[tuple[ast.expr, int, bool]] = field(default_factory=list)
    """What its body works on once per element without depending on the element (see
    :meth:`_Compiler.repeated`): the value's code, the work per element and unit of its size,
    and whether that size is its elements, deep (else its characters, or top elements)."""


_STEPS: Final = "_k"
"""The name of the record's step counter in the generated code: ``[steps left, the limit]``, made
per record, passed to every comprehension's function (only in code that needs one)."""


class _Compiler:
    def __init__(
        self,
        source: str,
        variables: tuple[str, ...],
        max_macro_depth: int,
        max_steps: int,
        *,
        counting: bool,
        cell: bool = False,
    ) -> None:
        self.source = source
        self.variables = variables
        self.scope: dict[str, str] = {name: name for name in variables}
        self.max_macro_depth = max_macro_depth
        self.max_steps = max_steps
        self.counting = counting
        """Whether the generated code counts steps (see :meth:`charged`)."""
        self.cell = cell
        """Whether it keeps a step counter per record (``_k``), for what adds up across the
        elements of a comprehension: comprehensions and matches nested in one."""
        self.charges = False
        """Whether some work must be counted: the code is then made again, counting."""
        self.needs_cell = False
        """Whether counting it needs the counter per record (see :attr:`cell`)."""
        self.macro_depth = 0
        self.loop_variables: list[str] = []
        """The variables of the comprehensions around the node being compiled, innermost last."""
        self.chained: set[int] = set()
        """The ``+`` nodes inside a chain of ``+`` whose first node counts for all of them."""
        self.probing: dict[int, int] = {}
        """Operands of chains of ``+`` to pay for (see :meth:`repeated`), by ``id``: the number
        of ``+`` in the chain."""
        self.frames: list[_Frame] = []
        """The functions of the comprehensions around the node being compiled, innermost last."""
        self.counter = 0
        self.functions: list[ast.stmt] = []
        self.namespace: dict[str, object] = {"__builtins__": {}, **_RUNTIME}
        self.patterns: dict[str, tuple[str, int]] = {}
        self.types: dict[int, str] = {}
        """The static type of every node compiled, by ``id``, for the cost estimate."""
        self.programs: dict[int, int] = {}
        """The RE2 program size of each literal ``matches`` pattern, by its node's ``id``."""
        self.result = _Code(_const(None), NULL)

    def fail(self, message: str, pos: int) -> NoReturn:
        raise ExpressionError(message, pos, self.source)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def bind(self, value: ast.expr) -> tuple[ast.expr, Callable[[], ast.expr]]:
        """Prepare ``value`` to be used several times.

        Returns:
            The expression to put where ``value`` is evaluated first (a walrus binding a temporary
            unless ``value`` is a name or a constant), and a factory of references to it.
        """
        if isinstance(value, ast.Name):
            name = value.id
            return value, lambda: _load(name)
        if isinstance(value, ast.Constant):
            constant = value.value
            return value, lambda: _const(constant)
        temp = self.fresh("_t")
        return ast.NamedExpr(target=_store(temp), value=value), lambda: _load(temp)

    def checked_bool(self, code: _Code, what: str, pos: int) -> ast.expr:
        """``code`` as a bool: as it is if statically bool, guarded at run time if dyn."""
        if code.type == BOOL:
            return code.expr
        if code.type != DYN:
            self.fail(f"{what} must be bool, not {code.type}", pos)
        first, ref = self.bind(code.expr)
        return _if(
            _compare(_type_of(first), ast.Is(), _load("_bool")),
            ref(),
            _call("_not_bool", _const(what), ref()),
        )

    # -- counting steps

    def charged(self, *, cell: bool = False) -> bool:
        """Whether work being compiled now is counted: it is inside a comprehension's body.

        What a comprehension's body does runs once per element, so its cost multiplies; what is
        outside runs once per record and is bounded by the estimate at submission. ``cell``:
        the work needs the record's counter (it adds up over the elements of a comprehension
        around). Returns whether to emit the counting code (the first pass only takes note).
        """
        if self.macro_depth == 0:
            return False
        self.charges = True
        self.needs_cell = self.needs_cell or cell or self.macro_depth > 1
        return self.counting

    def invariant(self, *nodes: _Node) -> bool:
        """Whether none of ``nodes`` is a literal or depends on the innermost loop variable.

        Work on a value that depends on the element adds up, over the range, to at most the
        range's size (the elements' sizes do); on a literal, to little. Work on values that do
        not is the same for every element: its total is the range's size times theirs.
        """
        if not self.loop_variables:
            return False
        variable = self.loop_variables[-1]
        return not any(isinstance(node, _Lit) or _mentions(node, variable) for node in nodes)

    def repeated(self, node: _Node, code: _Code, factor: int, *, deep: bool = False) -> None:
        """Pay for work on ``node``'s value done per element, if it does not depend on it.

        The comprehension pays once, as it starts, for all the elements: it evaluates the
        value (an error then is ignored: the body raises it where it would) and pays its size
        times the range's, times ``factor``: a tenth per character (or per top element of a
        list copied), or one per element visited, all levels down (``deep``). The body runs
        as it would without a budget: nothing is counted per element.
        """
        if self.invariant(node) and self.charged():
            self.frames[-1].probes.append((copy.deepcopy(code.expr), factor, deep))

    def counted(self, helper: str, *args: ast.expr) -> ast.expr:
        """A call of the run-time helper ``helper`` with the step counter as its first argument."""
        return _call(helper, _load(_STEPS), *args)

    def probe(self, code: ast.expr, items: str, factor: int, deep: bool) -> list[ast.stmt]:
        """Statements paying for a value's work per element (see :meth:`repeated`)."""
        value = self.fresh("_p")
        handler = ast.ExceptHandler(
            type=_load("_NATURAL"),  # EvaluationError is a ValueError
            name=None,
            body=[ast.Assign(targets=[_store(value)], value=_const(None))],
        )
        attempt = ast.Try(
            body=[ast.Assign(targets=[_store(value)], value=code)],
            handlers=[handler],
            orelse=[],
            finalbody=[],
        )
        steps = _load(_STEPS) if self.cell else _const(None)
        pay = _call(
            "_pay_repeated",
            steps,
            _const(self.max_steps),
            _load(value),
            _load(items),
            _const(factor),
            _const(deep),
        )
        # A short string is not worth the call (nor counted: bounded work, as a node's).
        work = ast.BinOp(
            left=ast.BinOp(
                left=_call("_len", _load(value)),
                op=ast.Mult(),
                right=_call("_len", _load(items)),
            ),
            op=ast.Mult(),
            right=_const(factor),
        )
        worth = _compare(work, ast.GtE(), _const(_FREE_WORK))
        is_str = _compare(_type_of(_load(value)), ast.Is(), _load("_str"))
        sized = ast.BoolOp(
            op=ast.Or(),
            values=[
                _compare(_type_of(_load(value)), ast.Is(), _load("_list")),
                _compare(_type_of(_load(value)), ast.Is(), _load("_dict")),
            ],
        )
        check = ast.If(
            test=is_str,
            body=[ast.If(test=worth, body=[ast.Expr(value=pay)], orelse=[])],
            orelse=[ast.If(test=sized, body=[ast.Expr(value=pay)], orelse=[])],
        )
        return [attempt, check]

    def steps_cell(self) -> ast.expr:
        """A new step counter: ``[max_steps, max_steps]``."""
        return ast.List(elts=[_const(self.max_steps), _const(self.max_steps)], ctx=ast.Load())

    # -- the whole expression

    def module(self, tree: _Node) -> tuple[ast.Module, str]:
        code = self.expr(tree)
        args = [ast.arg(arg=name) for name in self.variables]
        body: list[ast.stmt] = [_translating(code.expr)]
        if self.cell:
            body.insert(0, ast.Assign(targets=[_store(_STEPS)], value=self.steps_cell()))
        main = ast.FunctionDef(
            name="_cel", args=_arguments(args), body=body, decorator_list=[], returns=None
        )
        self.result = code
        return ast.Module(body=[*self.functions, main], type_ignores=[]), code.type

    def batch(self, shape: str) -> ast.FunctionDef:
        """``_cel_<shape>(_values, *other variables)``: the expression over a whole batch.

        Built after :meth:`module`, from the same expression tree (copied): one list
        comprehension over the first variable, in the same ``try`` that turns Python's
        exceptions into :class:`EvaluationError`.
        """
        code = copy.deepcopy(self.result)
        first, *rest = self.variables
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
        comprehension = ast.ListComp(elt=element, generators=generators)
        body: list[ast.stmt] = [_translating(comprehension)]
        args = [ast.arg(arg="_values"), *(ast.arg(arg=name) for name in rest)]
        return ast.FunctionDef(
            name=f"_cel_{shape}", args=_arguments(args), body=body, decorator_list=[], returns=None
        )

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
        """``code`` as a key: lists become tuples and maps fail; checked only when needed."""
        if code.type in (INT, UINT, DOUBLE, STRING, BOOL, NULL):
            return code.expr
        first, ref = self.bind(code.expr)
        plain = _and(
            _compare(_type_of(first), ast.IsNot(), _load("_list")),
            _compare(_type_of(ref()), ast.IsNot(), _load("_dict")),
        )
        return _if(plain, ref(), _call("_hashable", ref()))

    def expr(self, node: _Node) -> _Code:
        code = self.node(node)
        self.types[id(node)] = code.type
        links = self.probing.pop(id(node), 0)
        if links and code.type in (STRING, LIST, DYN):
            self.repeated(node, code, links)
        return code

    def node(self, node: _Node) -> _Code:
        if isinstance(node, _Lit):
            return _Code(_const(node.value), node.type)
        if isinstance(node, _Ident):
            name = self.scope.get(node.name)
            if name is None:
                self.fail(f"unknown identifier {node.name!r}", node.pos)
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
            self.fail(f"no such overload: field selection on {operand.type}", node.pos)
        subscript = ast.Subscript(value=operand.expr, slice=_const(node.name), ctx=ast.Load())
        return _Code(subscript, DYN)

    def index(self, node: _Index) -> _Code:
        container, index = self.expr(node.operand), self.expr(node.index)
        ct, it = container.type, index.type
        valid = (
            (ct == LIST and it in (INT, UINT, DYN))
            or (ct == MAP and it not in (LIST, MAP, NULL))
            or (ct == DYN and it not in (LIST, MAP, NULL))
        )
        if not valid:
            self.fail(f"no such overload: {ct}[{it}]", node.pos)
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

    # -- calls

    def call(self, node: _Call) -> _Code:
        name, args = node.name, node.args
        if node.target is None:
            if name == "has":
                self.arity(node, (1,))
                return self.has(node, args[0])
            if name == "matches":
                self.arity(node, (2,))
                return self.matches(node, self.expr(args[0]), args[1])
            if name not in _FUNCTIONS:
                self.fail(f"unknown function {name!r}", node.pos)
            self.arity(node, (_FUNCTIONS[name],))
            return self.function(node, name, self.expr(args[0]))
        if name in _MACROS:
            self.arity(node, _MACROS[name])
            return self.macro(node, self.expr(node.target))
        if name not in _METHODS:
            self.fail(f"unknown method {name!r}", node.pos)
        self.arity(node, (_METHODS[name],))
        receiver = self.expr(node.target)
        if name == "size":
            return self.function(node, name, receiver)
        if name == "matches":
            return self.matches(node, receiver, args[0])
        return self.string_method(node, receiver, [self.expr(arg) for arg in args])

    def arity(self, node: _Call, counts: tuple[int, ...]) -> None:
        if len(node.args) not in counts:
            expected = " or ".join(str(count) for count in counts)
            noun = "argument" if counts == (1,) else "arguments"
            self.fail(f"{node.name}() takes {expected} {noun}, got {len(node.args)}", node.pos)

    def function(self, node: _Call, name: str, arg: _Code) -> _Code:
        t = arg.type
        arg_node = node.args[0] if node.target is None else node.target
        if name == "dyn":
            return _Code(arg.expr, DYN)
        if name == "size":
            if t not in (STRING, LIST, MAP, DYN):
                self.fail(f"no such overload: size({t})", node.pos)
            return _Code(_call("_len", arg.expr), INT)
        result, accepted = _CONVERSIONS[name]
        if t not in accepted:
            self.fail(f"no such overload: {name}({t})", node.pos)
        if t == result:
            return arg
        if name != "string" and t in (STRING, DYN):
            self.repeated(arg_node, arg, 1)  # parsing reads the whole string
        return _Code(_call(f"_to_{name}", arg.expr), result)

    def has(self, node: _Call, arg: _Node) -> _Code:
        if not isinstance(arg, _Select):
            self.fail("has() takes a field selection, such as has(r.field)", node.pos)
        operand = self.expr(arg.operand)
        if operand.type not in (MAP, DYN):
            self.fail(f"no such overload: field selection on {operand.type}", arg.pos)
        if operand.type == MAP:
            return _Code(_compare(_const(arg.name), ast.In(), operand.expr), BOOL)
        first, ref = self.bind(operand.expr)
        guard = _compare(_type_of(first), ast.Is(), _load("_dict"))
        lookup = _compare(_const(arg.name), ast.In(), ref())
        return _Code(_if(guard, lookup, _call("_has", ref(), _const(arg.name))), BOOL)

    def matches(self, node: _Call, subject: _Code, pattern: _Node) -> _Code:
        """RE2's search for ``pattern`` in ``subject``, compiled now if it is a literal."""
        if subject.type not in (STRING, DYN):
            self.fail(f"no such overload: {subject.type}.matches(string)", node.pos)
        if not (isinstance(pattern, _Lit) and pattern.type == STRING):
            dynamic = self.expr(pattern)
            if dynamic.type not in (STRING, DYN):
                self.fail(f"no such overload: string.matches({dynamic.type})", pattern.pos)
            if self.charged(cell=True):
                search = self.counted("_search_dynamic_counted", subject.expr, dynamic.expr)
                return _Code(search, BOOL)
            limit = _const(self.max_steps)
            return _Code(_call("_search_dynamic", subject.expr, dynamic.expr, limit), BOOL)
        text = pattern.value
        assert isinstance(text, str)
        known = self.patterns.get(text)
        if known is None:
            compiled = _cached_regex(text)
            if isinstance(compiled, str):
                self.fail(f"invalid regular expression: {compiled}", pattern.pos)
            name = self.fresh("_re")
            self.namespace[name] = compiled
            known = self.patterns[text] = (name, compiled.program)
        name, program = known
        self.programs[id(pattern)] = program
        if self.charged(cell=True):
            return _Code(self.counted("_search_counted", _load(name), subject.expr), BOOL)
        limit = _const(self.max_steps)
        return _Code(_call("_search", _load(name), limit, subject.expr), BOOL)

    def string_method(self, node: _Call, receiver: _Code, args: list[_Code]) -> _Code:
        name = node.name
        types = [arg.type for arg in args]
        if receiver.type not in (STRING, DYN) or any(t not in (STRING, DYN) for t in types):
            self.fail(f"no such overload: {receiver.type}.{name}({', '.join(types)})", node.pos)
        assert node.target is not None
        # contains, lower and upper read the whole receiver; startsWith and endsWith at most
        # the shorter of the two strings (both must not depend on the element to add up).
        if name in ("contains", "lower", "upper") or self.invariant(*node.args):
            self.repeated(node.target, receiver, 1)
        if name in ("startsWith", "endsWith") and types == [DYN]:
            helper = "_starts_with" if name == "startsWith" else "_ends_with"
            return _Code(_call(helper, receiver.expr, args[0].expr), BOOL)
        result = STRING if name in ("lower", "upper") else BOOL
        python = {"startsWith": "startswith", "endsWith": "endswith"}.get(name, name)

        def apply(receiver: ast.expr) -> ast.expr:
            if name == "contains":
                return _compare(args[0].expr, ast.In(), receiver)
            return _method(receiver, python, *(arg.expr for arg in args))

        if receiver.type == STRING:
            value = apply(receiver.expr)
        else:
            first, ref = self.bind(receiver.expr)
            guard = _compare(_type_of(first), ast.Is(), _load("_str"))
            fail = _call("_bad_call", _const(name), ref(), *(_const(t) for t in types))
            value = _if(guard, apply(ref()), fail)
        return _Code(value, result)

    def macro(self, node: _Call, target: _Code) -> _Code:
        name = node.name
        variable = node.args[0]
        if not isinstance(variable, _Ident):
            self.fail(f"the first argument of {name}() must be a variable name", variable.pos)
        if target.type not in (LIST, MAP, DYN):
            self.fail(f"no such overload: {target.type}.{name}()", node.pos)
        if self.macro_depth >= self.max_macro_depth:
            limit = _plural(self.max_macro_depth, "level")
            self.fail(f"macros nested too deeply (more than {limit})", node.pos)
        function, container, item = self.fresh("_m"), self.fresh("_c"), self.fresh("_v")
        steps = [_STEPS] if self.cell else []
        params = [container, *steps, *dict.fromkeys(self.scope.values())]
        outer = self.scope.get(variable.name)
        self.scope[variable.name] = item
        self.macro_depth += 1
        self.loop_variables.append(variable.name)
        frame = _Frame(self.fresh("_i"))
        self.frames.append(frame)
        try:
            parts = [self.expr(arg) for arg in node.args[1:]]
        finally:
            self.macro_depth -= 1
            self.loop_variables.pop()
            self.frames.pop()
            if outer is None:
                del self.scope[variable.name]
            else:
                self.scope[variable.name] = outer
        iterable: ast.expr = _if(
            _compare(_type_of(_load(container)), ast.Is(), _load("_list")),
            _load(container),
            _call("_iterable", _load(container), _const(name)),
        )
        prologue: list[ast.stmt] = []
        nested = self.charged(cell=True)
        items = frame.items
        if nested or frame.probes:
            prologue.append(ast.Assign(targets=[_store(items)], value=iterable))
            iterable = _load(items)
        for code, factor, deep in frame.probes:
            prologue += self.probe(code, items, factor, deep)
        if nested:
            # Nested in another comprehension: its whole run is paid for as it starts, its
            # range times the nodes of its body (exists and all may stop early: an upper bound),
            # a call of a helper counting as 5 nodes, as it takes about as long. A range of at
            # most _SMALL_RANGE elements is not: its work per element of the comprehension
            # around it is bounded, as a node's is; and most nested ranges are such.
            calls = sum(_helper_calls(part.expr) for part in parts)
            weight = 1 + sum(_nodes_per_run(arg) for arg in node.args[1:]) + 4 * calls
            size = _call("_len", _load(items))
            charge = self.counted("_charge_items", _load(items), _const(weight))
            large = _compare(size, ast.Gt(), _const(_SMALL_RANGE))
            prologue.append(ast.If(test=large, body=[ast.Expr(value=charge)], orelse=[]))
        body = prologue + self.macro_body(node, name, item, iterable, parts)
        definition = ast.FunctionDef(
            name=function,
            args=_arguments([ast.arg(arg=param) for param in params]),
            body=body,
            decorator_list=[],
            returns=None,
        )
        self.functions.append(definition)
        call = _call(function, target.expr, *(_load(param) for param in params[1:]))
        return _Code(call, LIST if name in ("map", "filter") else BOOL)

    def macro_body(
        self, node: _Call, name: str, item: str, iterable: ast.expr, parts: list[_Code]
    ) -> list[ast.stmt]:
        def predicate(code: _Code) -> ast.expr:
            return self.checked_bool(code, f"the predicate of {name}()", node.pos)

        def loop(body: list[ast.stmt]) -> ast.For:
            return ast.For(target=_store(item), iter=iterable, body=body, orelse=[])

        def returns(value: object) -> ast.Return:
            return ast.Return(value=_const(value))

        if name in ("map", "filter"):
            generator = ast.comprehension(target=_store(item), iter=iterable, ifs=[], is_async=0)
            if name == "filter":
                generator.ifs.append(predicate(parts[0]))
                element: ast.expr = _load(item)
            else:
                if len(parts) == 2:
                    generator.ifs.append(predicate(parts[0]))
                element = parts[-1].expr
            return [ast.Return(value=ast.ListComp(elt=element, generators=[generator]))]
        test = predicate(parts[0])
        if name == "all":
            negated = ast.UnaryOp(op=ast.Not(), operand=test)
            return [loop([ast.If(test=negated, body=[returns(False)], orelse=[])]), returns(True)]
        if name == "exists":
            return [loop([ast.If(test=test, body=[returns(True)], orelse=[])]), returns(False)]
        count = self.fresh("_n")
        second = ast.If(test=_load(count), body=[returns(False)], orelse=[])
        first = ast.Assign(targets=[_store(count)], value=_const(1))
        found = ast.If(test=test, body=[second, first], orelse=[])
        initial = ast.Assign(targets=[_store(count)], value=_const(0))
        result = ast.Return(value=_compare(_load(count), ast.Eq(), _const(1)))
        return [initial, loop([found]), result]

    # -- operators

    def unary(self, node: _Unary) -> _Code:
        operand = self.expr(node.operand)
        t = operand.type
        if node.op == "!":
            if t == BOOL:
                return _Code(ast.UnaryOp(op=ast.Not(), operand=operand.expr), BOOL)
            if t != DYN:
                self.fail(f"no such overload: !{t}", node.pos)
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
            self.fail(f"no such overload: -{t}", node.pos)
        return _Code(_call("_neg", operand.expr), DYN)

    def logic(self, node: _Logic) -> _Code:
        values: list[ast.expr] = []
        for k, operand in enumerate(node.operands):
            code = self.expr(operand)
            pos = node.positions[max(k - 1, 0)]
            values.append(self.checked_bool(code, f"the operands of '{node.op}'", pos))
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
                self.fail(f"unsupported map key type: {key.type}", key_node.pos)
            if isinstance(key.expr, ast.Constant):
                if key.expr.value in seen:
                    self.fail(f"duplicate map key: {_show_key(key.expr.value)}", key_node.pos)
                seen.append(key.expr.value)
        if all(isinstance(key.expr, ast.Constant) for key in keys):
            return _Code(ast.Dict(keys=[key.expr for key in keys], values=values), MAP)
        key_list = ast.List(elts=[key.expr for key in keys], ctx=ast.Load())
        value_list = ast.List(elts=values, ctx=ast.Load())
        return _Code(_call("_map_of", key_list, value_list), MAP)

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
        self.fail(f"no such overload: {left} {node.op} {right}", node.pos)

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
            return _Code(_compare(a.expr, cmpop(), b.expr), BOOL)
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
        is_bool: ast.cmpop = ast.Is() if static == BOOL else ast.IsNot()
        guard = _compare(_type_of(first), is_bool, _load("_bool"))
        fail = _call("_fail", _const(op), ref(), _const(static), _const(dyn_left))
        return _Code(_if(guard, _compare(left, cmpop(), right), fail), BOOL)

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


def _helper_calls(code: ast.expr) -> int:
    """The calls in ``code`` of functions written in Python (``type`` and ``len`` are not)."""
    return sum(
        isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _CHEAP)
        for n in ast.walk(code)
    )


_CHEAP: Final = frozenset({"_type", "_len"})


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


# --------------------------------------------------------------------------- the cost estimate

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
        if name == "contains":
            return _Estimate(cost + self.characters(receiver.size), _SMALL)
        read = self.least(receiver.size, args[0].size)  # startsWith, endsWith
        return _Estimate(cost + self.characters(read), _SMALL)

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
#
# The generated code does the common case inline and calls these for the rest. They are the only
# names its globals hold besides the types it checks against.

_TYPE_NAMES: Final[dict[type, str]] = {
    bool: BOOL,
    int: INT,
    float: DOUBLE,
    str: STRING,
    type(None): NULL,
    list: LIST,
    tuple: LIST,
    dict: MAP,
    bytes: "bytes",
}
_PYTHON_TYPE_NAMES: Final = {
    "str": STRING,
    "float": DOUBLE,
    "NoneType": NULL,
    "dict": MAP,
    "tuple": LIST,
}


def _type_name(value: object) -> str:
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, Mapping):
        return MAP
    if isinstance(value, list | tuple):
        return LIST
    return type(value).__name__


def _show_key(key: object) -> str:
    if type(key) is bool:
        return "true" if key else "false"
    return str(key)


def _overflow() -> NoReturn:
    raise EvaluationError("integer overflow")


def _uoverflow() -> NoReturn:
    raise EvaluationError("unsigned integer overflow")


def _no_overload(op: str, left: str, right: str) -> NoReturn:
    raise EvaluationError(f"no such overload: {left} {op} {right}")


def _fail(op: str, value: object, static: str, value_left: bool) -> NoReturn:
    """Raise for ``value op <static>`` (or the other way round): no such overload."""
    name = _type_name(value)
    _no_overload(op, *((name, static) if value_left else (static, name)))


def _arith_fail(op: str, value: object, static: str, value_left: bool) -> NoReturn:
    """Raise for an arithmetic fast path that did not apply: an overflow, or wrong types."""
    if type(value) is int and static in (INT, UINT):
        if static == INT:
            _overflow()
        _uoverflow()
    _fail(op, value, static, value_left)


def _arith(op: str, a: object, b: object) -> object:
    """``a op b`` for ``+ - *`` on operands of types known only when evaluated."""
    if type(a) is int and type(b) is int:
        result = a + b if op == "+" else a - b if op == "-" else a * b
        if not INT64_MIN <= result <= INT64_MAX:
            _overflow()
        return result
    if type(a) is float and type(b) is float:
        return a + b if op == "+" else a - b if op == "-" else a * b
    if op == "+":
        if type(a) is str and type(b) is str:
            return a + b
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return [*a, *b]
    _no_overload(op, _type_name(a), _type_name(b))


def _div(a: object, b: object) -> object:
    """CEL's ``/``: ints truncate toward zero, doubles follow IEEE 754."""
    if type(a) is int and type(b) is int:
        if b == 0:
            raise EvaluationError("division by zero")
        if b == -1 and a == INT64_MIN:
            _overflow()
        quotient = abs(a) // abs(b)
        return -quotient if (a < 0) != (b < 0) else quotient
    if type(a) is float and type(b) is float:
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    _no_overload("/", _type_name(a), _type_name(b))


def _mod(a: object, b: object) -> object:
    """CEL's ``%`` on ints: the remainder of the division truncated toward zero."""
    if type(a) is int and type(b) is int:
        if b == 0:
            raise EvaluationError("modulus by zero")
        remainder = abs(a) % abs(b)
        return -remainder if a < 0 else remainder
    _no_overload("%", _type_name(a), _type_name(b))


def _neg(value: object) -> object:
    if type(value) is int:
        assert isinstance(value, int)
        if value == INT64_MIN:
            _overflow()
        return -value
    if type(value) is float:
        assert isinstance(value, float)
        return -value
    raise EvaluationError(f"no such overload: -{_type_name(value)}")


def _not_bool(what: str, value: object) -> NoReturn:
    raise EvaluationError(f"{what} must be bool, not {_type_name(value)}")


# -- counting steps (see MAX_STEPS). ``steps`` is the record's counter: [steps left, the limit].


def _exceeded(steps: list[int]) -> NoReturn:
    raise EvaluationError(f"step limit exceeded: the record needs more than {steps[1]:,} steps")


def _charge(steps: list[int], count: int) -> None:
    left = steps[0] - count
    steps[0] = left
    if left < 0:
        _exceeded(steps)


_SMALL_RANGE: Final = 16
"""A comprehension nested in another over at most this many elements is not counted."""

_FREE_WORK: Final = 2560
"""Work on a string that does not depend on the element, per comprehension, is not counted
under this many characters (its size times the range's): 256 steps, a bounded amount."""


def _charge_items(steps: list[int], items: Sized, weight: int) -> None:
    """Pay for a nested comprehension as it starts: its range's size times its body's nodes."""
    left = steps[0] - len(items) * weight
    steps[0] = left
    if left < 0:
        _exceeded(steps)


def _elements(value: object) -> int:
    """The elements of a list or map, all levels down (of anything else, none)."""
    if isinstance(value, list | tuple):
        return len(value) + sum(_elements(item) for item in value)
    if isinstance(value, Mapping):
        return len(value) + sum(_elements(item) for item in value.values())
    return 0


def _pay_repeated(
    steps: list[int] | None, limit: int, value: object, items: Sized, factor: int, deep: bool
) -> None:
    """Pay for work on ``value`` done once per element of ``items`` (a comprehension's range).

    A tenth of a step per character of a string (or per element of a list copied) times
    ``factor``; or, ``deep``, a step per element of a list or map, all levels down. Into the
    record's counter, or, without one (a comprehension not nested in another), against the
    limit on its own.
    """
    if type(value) is str or not deep:
        work = len(cast("Sized", value)) * len(items) * factor // 10
    else:
        work = _elements(value) * len(items) * factor
    if steps is not None:
        _charge(steps, work)
    elif work > limit:
        _exceeded([limit - work, limit])


# -- regular expressions: RE2, linear in the string (CEL specifies RE2's syntax and semantics)

_REGEX_COST_DIVISOR: Final = 4
"""A search costs its string's bytes times its pattern's RE2 program size, divided by this: in
the worst case (a pattern whose DFA does not fit, searched with the NFA) RE2 takes about 10 ns
per byte and instruction, about a quarter of a step."""

_REGEX_MEMORY: Final = 2 << 20
"""RE2's memory budget per pattern (its program and DFA caches; past it, the slower NFA)."""

_REGEX_CACHE_SIZE: Final = 256
_REGEX_CACHED_LENGTH: Final = 4096
"""Patterns longer than this (only patterns read from records can be) are not kept."""

_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # an invalid pattern is reported to the client, not to stderr
_RE2_OPTIONS.never_capture = True  # matches() needs no groups: RE2 then needs no submatch engine
_RE2_OPTIONS.max_mem = _REGEX_MEMORY
_UNANCHORED: Final = re2._re2.RE2.Anchor.UNANCHORED


_MEMO_SIZE: Final = 256
_MEMO_LENGTH: Final = 64
"""A pattern keeps its answers on the first ``_MEMO_SIZE`` strings of at most ``_MEMO_LENGTH``
characters it searches: a call of the RE2 binding costs about a microsecond (five times a search
with Python's ``re``), a dict look-up a twentieth of that, and filters often test a field of
few values."""


class _Regex:
    """A pattern for ``matches``, compiled by RE2, with the answers it has given on short strings.

    The binding's own ``re2.compile`` would keep every pattern in a cache of its own (up to 128
    of up to 8 MiB each) and build a match object per search; the compiled RE2 object is called
    directly instead.
    """

    __slots__ = ("memo", "program", "regexp")

    def __init__(self, regexp: Any) -> None:
        self.regexp = regexp
        self.program = max(1, int(regexp.ProgramSize()))
        """The size of its RE2 program, which bounds its work per byte (see _REGEX_COST_DIVISOR)."""
        self.memo: dict[str, tuple[bool, int]] = {}
        """Answers on short strings: whether found, and the string's size in bytes."""

    def search(self, text: object, limit: int, steps: list[int] | None = None) -> bool:
        """Whether the pattern is in ``text``, paid for before searching.

        Into the record's counter ``steps`` if given, else the search may cost at most
        ``limit`` steps.

        Raises:
            EvaluationError: ``text`` is not a string (or not valid Unicode), or searching it
                would take more steps than there are.
        """
        if type(text) is not str:
            raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
        assert isinstance(text, str)
        known = self.memo.get(text)
        if known is not None:
            found, size = known
        else:
            try:
                data = text.encode()
            except UnicodeEncodeError:
                raise EvaluationError("matches() on a string that is not valid Unicode") from None
            size = len(data)
            found = None
        cost = size * self.program // _REGEX_COST_DIVISOR
        if steps is not None:  # before searching, so that the search is never too long
            _charge(steps, cost)
        elif cost > limit:
            raise EvaluationError(
                f"matches() would take more than the step limit ({limit:,}): a string of"
                f" {size:,} bytes against a pattern of {self.program:,} RE2 instructions"
            )
        if found is None:
            found = bool(self.regexp.Match(_UNANCHORED, data, 0, size)[0][0] >= 0)
            if len(text) <= _MEMO_LENGTH and len(self.memo) < _MEMO_SIZE:
                self.memo[text] = (found, size)
        return found


def _regex(pattern: str) -> _Regex | str:
    """RE2's compiled ``pattern``, or why it does not compile."""
    try:
        data = pattern.encode()
    except UnicodeEncodeError:
        return "the pattern is not valid Unicode"
    regexp = re2._re2.RE2(data, _RE2_OPTIONS)
    if not regexp.ok():
        message = regexp.error()
        return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return _Regex(regexp)


@functools.lru_cache(maxsize=_REGEX_CACHE_SIZE)
def _cached_pattern(pattern: str) -> _Regex | str:
    return _regex(pattern)


def _cached_regex(pattern: str) -> _Regex | str:
    """:func:`_regex`, through a bounded cache (which keeps what does not compile, too)."""
    if len(pattern) > _REGEX_CACHED_LENGTH:
        return _regex(pattern)
    return _cached_pattern(pattern)


def _search(regex: _Regex, limit: int, text: object) -> bool:
    """``text.matches(<literal pattern>)``, if it costs at most ``limit`` steps."""
    return regex.search(text, limit)


def _search_counted(steps: list[int], regex: _Regex, text: object) -> bool:
    """``text.matches(<literal pattern>)`` in a comprehension: paid for before it runs."""
    return regex.search(text, steps[1], steps)


def _dynamic_regex(pattern: object) -> _Regex:
    if type(pattern) is not str:
        raise EvaluationError(f"no such overload: string.matches({_type_name(pattern)})")
    assert isinstance(pattern, str)
    compiled = _cached_regex(pattern)
    if isinstance(compiled, str):
        raise EvaluationError(f"invalid regular expression: {compiled}")
    return compiled


def _search_dynamic(text: object, pattern: object, limit: int) -> bool:
    """``text.matches(pattern)`` with a pattern known only now, compiled (and cached) now."""
    if type(text) is not str:  # the receiver's error first, as with a literal pattern
        raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
    return _dynamic_regex(pattern).search(text, limit)


def _search_dynamic_counted(steps: list[int], text: object, pattern: object) -> bool:
    """:func:`_search_dynamic` in a comprehension: paid for before it runs."""
    if type(text) is not str:
        raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
    return _dynamic_regex(pattern).search(text, steps[1], steps)


def hashable(value: Any) -> Hashable:
    """``value`` as a key (for exchange, grouping and joins): lists become tuples.

    >>> hashable([1, [2, "x"]])
    (1, (2, 'x'))
    """
    if type(value) is list or type(value) is tuple:
        return tuple(hashable(item) for item in value)
    if type(value) is dict:
        raise EvaluationError("a key cannot be a map")
    return cast(Hashable, value)


_ORDER_OPS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _order(op: str, a: object, b: object) -> bool:
    """``a op b`` for ``< <= > >=`` on operands of types known only when evaluated."""
    ta, tb = type(a), type(b)
    numbers = (ta is int or ta is float) and (tb is int or tb is float)
    if numbers or (ta is tb and ta in (str, bool)):
        return _ORDER_OPS[op](a, b)
    _no_overload(op, _type_name(a), _type_name(b))


def _eq(a: object, b: object) -> bool:
    """CEL's heterogeneous equality."""
    ta, tb = type(a), type(b)
    if ta is tb and ta is not list and ta is not dict and ta is not tuple:  # faster than `in`
        return a == b
    if (ta is int or ta is float) and (tb is int or tb is float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            try:
                other = b[key]
            except (KeyError, TypeError):
                return False
            if not _eq(value, other):
                return False
        return True
    return False


def _in(value: object, container: object) -> bool:
    """CEL's ``value in container`` for a list (equality) or a map (its keys)."""
    if isinstance(container, list | tuple):
        # Python's == holds wherever CEL's does on JSON values (and also for 1 == true): its
        # scan, in C, rules most lists out; a str is equal to a str only, in both.
        if value not in container:
            return False
        return type(value) is str or any(_eq(value, item) for item in container)
    if isinstance(container, Mapping):
        if type(value) is str:
            return value in container
        return any(_eq(key, value) for key in container)
    raise EvaluationError(f"no such overload: {_type_name(value)} in {_type_name(container)}")


def _index(container: object, key: object) -> object:
    """``container[key]``: a list by a non-negative int, or a map by a key."""
    if isinstance(container, list | tuple):
        if type(key) is not int:
            raise EvaluationError(f"no such overload: list[{_type_name(key)}]")
        assert isinstance(key, int)
        if not 0 <= key < len(container):
            raise EvaluationError(f"index out of range: {key}")
        return container[key]
    if isinstance(container, Mapping):
        if type(key) is float:
            assert isinstance(key, float)
            if not key.is_integer():
                raise EvaluationError(f"no such key: {key}")
            key = int(key)
        try:
            return container[key]
        except KeyError:
            raise EvaluationError(f"no such key: {_show_key(key)}") from None
        except TypeError:
            raise EvaluationError(f"unsupported map key type: {_type_name(key)}") from None
    raise EvaluationError(f"no such overload: {_type_name(container)}[{_type_name(key)}]")


def _has(container: object, name: str) -> bool:
    if isinstance(container, Mapping):
        return name in container
    raise EvaluationError(f"no such overload: field selection on {_type_name(container)}")


def _map_of(keys: list[object], values: list[object]) -> dict[object, object]:
    result: dict[object, object] = {}
    for key, value in zip(keys, values, strict=True):
        if type(key) not in (str, int, bool):
            raise EvaluationError(f"unsupported map key type: {_type_name(key)}")
        if key in result:
            raise EvaluationError(f"duplicate map key: {_show_key(key)}")
        result[key] = value
    return result


def _iterable(container: object, macro: str) -> Iterable[object]:
    if isinstance(container, list | tuple | Mapping):
        return container
    raise EvaluationError(f"no such overload: {_type_name(container)}.{macro}()")


def _bad_call(name: str, receiver: object, *arg_types: str) -> NoReturn:
    arguments = ", ".join(arg_types)
    raise EvaluationError(f"no such overload: {_type_name(receiver)}.{name}({arguments})")


def _starts_with(receiver: object, prefix: object) -> bool:
    if type(receiver) is str and type(prefix) is str:
        return receiver.startswith(prefix)
    _bad_call("startsWith", receiver, _type_name(prefix))


def _ends_with(receiver: object, suffix: object) -> bool:
    if type(receiver) is str and type(suffix) is str:
        return receiver.endswith(suffix)
    _bad_call("endsWith", receiver, _type_name(suffix))


_INT_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UINT_TEXT = re.compile(r"[0-9]+", re.ASCII)
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE,
)


def _to_int(value: object) -> int:
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        result = value
    elif kind is float:
        assert isinstance(value, float)
        if not -(2.0**63) <= value < 2.0**63:
            raise EvaluationError(f"int() out of range: {_to_string(value)}")
        result = int(value)
    elif kind is str:
        assert isinstance(value, str)
        if _INT_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"int() cannot convert the string {value!r}")
        result = int(value)
    else:
        raise EvaluationError(f"no such overload: int({_type_name(value)})")
    if not INT64_MIN <= result <= INT64_MAX:
        raise EvaluationError(f"int() out of range: {value}")
    return result


def _to_uint(value: object) -> int:
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        result = value
    elif kind is float:
        assert isinstance(value, float)
        if not 0.0 <= value < 2.0**64:
            raise EvaluationError(f"uint() out of range: {_to_string(value)}")
        result = int(value)
    elif kind is str:
        assert isinstance(value, str)
        if _UINT_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"uint() cannot convert the string {value!r}")
        result = int(value)
    else:
        raise EvaluationError(f"no such overload: uint({_type_name(value)})")
    if not 0 <= result <= UINT64_MAX:
        raise EvaluationError(f"uint() out of range: {value}")
    return result


def _to_double(value: object) -> float:
    kind = type(value)
    if kind is float:
        assert isinstance(value, float)
        return value
    if kind is int:
        assert isinstance(value, int)
        return float(value)
    if kind is str:
        assert isinstance(value, str)
        if _DOUBLE_TEXT.fullmatch(value) is None:
            raise EvaluationError(f"double() cannot convert the string {value!r}")
        result = float(value)
        if math.isinf(result) and "inf" not in value.lower():
            raise EvaluationError(f"double() out of range: {value!r}")
        return result
    raise EvaluationError(f"no such overload: double({_type_name(value)})")


def _to_string(value: object) -> str:
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        return value
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        assert isinstance(value, float)
        return _format_double(value)
    raise EvaluationError(f"no such overload: string({_type_name(value)})")


def _format_double(value: float) -> str:
    """Format a double as Go's ``%g`` does (cel-go's ``string(double)``): 1e+06, 0.0001, 1.5."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        return "-0" if sign else "0"
    stripped = digits.rstrip("0")
    point = len(digits) + exponent  # the value is 0.<digits> x 10^point
    digits = stripped
    minus = "-" if sign else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"


_TYPE_ERROR_MESSAGES: Final[list[tuple[re.Pattern[str], str]]] = [
    (re.compile(r"'(\S+)' not supported between instances of '(\w+)' and '(\w+)'"), "{1} {0} {2}"),
    (re.compile(r"'(\w+)' object is not subscriptable"), "field selection on {0}"),
    (re.compile(r"^(\w+) indices must be integers"), "field selection on {0}"),
    (re.compile(r"object of type '(\w+)' has no len\(\)"), "size({0})"),
    (re.compile(r"expected string or bytes-like object, got '(\w+)'"), "{0}.matches(string)"),
    (
        re.compile(r"'in <string>' requires string as left operand, not (\w+)"),
        "string.contains({0})",
    ),
]


def _translate(error: Exception) -> EvaluationError:
    """The :class:`EvaluationError` for an exception Python raised while evaluating."""
    if isinstance(error, KeyError):
        return EvaluationError(f"no such key: {_show_key(error.args[0] if error.args else None)}")
    if isinstance(error, IndexError):
        return EvaluationError("index out of range")
    if isinstance(error, ZeroDivisionError):
        return EvaluationError("division by zero")
    if isinstance(error, RecursionError):
        return EvaluationError("a value is nested too deeply")
    message = str(error)
    if isinstance(error, TypeError):
        if (unhashable := re.match(r"unhashable type: '(\w+)'", message)) is not None:
            return EvaluationError(f"unsupported map key type: {_python_type(unhashable[1])}")
        for pattern, template in _TYPE_ERROR_MESSAGES:
            match = pattern.search(message)
            if match is not None:
                names = [_python_type(group) for group in match.groups()]
                return EvaluationError("no such overload: " + template.format(*names))
    return EvaluationError(f"no such overload: {message}")


def _python_type(name: str) -> str:
    return _PYTHON_TYPE_NAMES.get(name, name)


_RUNTIME: Final[dict[str, object]] = {
    "_type": type,
    "_int": int,
    "_float": float,
    "_str": str,
    "_bool": bool,
    "_list": list,
    "_dict": dict,
    "_len": len,
    "_EvaluationError": EvaluationError,
    "_NATURAL": (
        KeyError,
        IndexError,
        TypeError,
        ValueError,
        ZeroDivisionError,
        OverflowError,
        AttributeError,
        RecursionError,
    ),
    "_translate": _translate,
    "_overflow": _overflow,
    "_uoverflow": _uoverflow,
    "_fail": _fail,
    "_arith_fail": _arith_fail,
    "_arith": _arith,
    "_div": _div,
    "_mod": _mod,
    "_neg": _neg,
    "_not_bool": _not_bool,
    "_hashable": hashable,
    "_order": _order,
    "_eq": _eq,
    "_in": _in,
    "_index": _index,
    "_has": _has,
    "_map_of": _map_of,
    "_iterable": _iterable,
    "_bad_call": _bad_call,
    "_starts_with": _starts_with,
    "_ends_with": _ends_with,
    "_charge_items": _charge_items,
    "_pay_repeated": _pay_repeated,
    "_search": _search,
    "_search_counted": _search_counted,
    "_search_dynamic": _search_dynamic,
    "_search_dynamic_counted": _search_dynamic_counted,
    "_to_int": _to_int,
    "_to_uint": _to_uint,
    "_to_double": _to_double,
    "_to_string": _to_string,
}


# --------------------------------------------------------------------------- entry point

_VARIABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _check_variables(variables: Sequence[str]) -> tuple[str, ...]:
    if isinstance(variables, str):
        raise TypeError("variables must be a sequence of names, not a string")
    names = tuple(variables)
    for name in names:
        if (
            not _is_str(name)
            or _VARIABLE.match(name) is None
            or keyword.iskeyword(name)
            or name in _RESERVED
            or name in ("true", "false", "null", "in")
        ):
            raise ValueError(
                f"invalid variable name {name!r}: a variable is a letter followed by letters,"
                " digits and underscores, and neither a Python keyword nor a CEL reserved word"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variable names in {names!r}")
    return names


def compile_expression(
    source: str,
    variables: Sequence[str] = ("r",),
    *,
    max_length: int = 4096,
    max_depth: int = 48,
    max_nodes: int = 2000,
    max_macro_depth: int = 2,
    max_cost: float | None = MAX_COST,
    max_steps: int = MAX_STEPS,
    max_record_bytes: int = MAX_RECORD_BYTES,
    batch: Sequence[str] = (),
) -> Expression:
    """Parse, check and compile a CEL expression into a Python function.

    Args:
        source: The expression, e.g. ``'r.value * 2 > 10 && r.key != "x"'``.
        variables: The names the expression may refer to; the compiled function takes their
            values positionally in this order. Each must be a letter followed by letters,
            digits and underscores, and neither a Python keyword nor a CEL reserved word.
        max_length: The most characters ``source`` may have.
        max_depth: The most levels of nesting: of the parse tree (a chain of ``&&`` or ``||``
            counts as one level), and of parentheses, brackets, calls and ``?:``.
        max_nodes: The most nodes the parse tree may have (literals, names, operators, calls).
        max_macro_depth: The most macros (``all``, ``map``, ...) nested in each other's
            bodies; each level multiplies the work per record by the size of a list.
        max_cost: The most the estimated cost of the expression on a record of
            ``max_record_bytes`` may be (:data:`MAX_COST`); ``None``: no limit.
        max_steps: The most steps evaluating the expression may take on one record
            (:data:`MAX_STEPS`); a record that needs more fails with :class:`EvaluationError`.
        max_record_bytes: The size of the largest record, which the estimate assumes.
        batch: The batch forms to compile as well (:data:`BATCH_SHAPES`), over the first
            variable; they are in :attr:`Expression.batch`.

    Returns:
        The compiled :class:`Expression`.

    Raises:
        ExpressionError: The source does not compile: a lexical or syntax error, an unknown
            identifier, function or method, a wrong number of arguments, a type error visible
            without a record, an out-of-range literal, a literal ``matches`` pattern RE2 does
            not take, or a limit exceeded (the estimated cost included).
        ValueError: A variable name is invalid or repeated.
        TypeError: ``source`` is not a string, or ``variables`` is a string.
    """
    if not isinstance(source, str):
        raise TypeError(f"an expression is a string, not {type(source).__name__}")
    names = _check_variables(variables)
    if len(source) > max_length:
        raise ExpressionError(
            f"expression too long ({len(source)} characters, the limit is {max_length})",
            max_length,
            source,
        )
    try:
        tokens = _Lexer(source).tokens()
        tree = _Parser(source, tokens, max_depth, max_nodes).parse()
        compiler = _Compiler(source, names, max_macro_depth, max_steps, counting=False)
        module, result_type = compiler.module(tree)
        if compiler.charges:  # made again, counting (with a counter per record if need be)
            cell = compiler.needs_cell
            compiler = _Compiler(
                source, names, max_macro_depth, max_steps, counting=True, cell=cell
            )
            module, result_type = compiler.module(tree)
        estimator = _Estimator(compiler, max_record_bytes)
        cost = estimator.total(tree)
        if max_cost is not None and cost > max_cost:
            heaviest, position = estimator.heaviest
            blame = heaviest > max_cost  # else no one comprehension is over the limit
            raise ExpressionError(
                f"expression too costly: its estimated cost on a record of {max_record_bytes:,}"
                f" bytes is {cost:,.0f}, over the limit of {max_cost:,.0f}"
                + (" (this comprehension's range times its body's cost)" if blame else ""),
                position if blame else 0,
                source,
            )
        python = ast.unparse(ast.fix_missing_locations(module))
        if batch and not names:
            raise ValueError("batch forms need a variable to range over")
        module.body.extend(compiler.batch(shape) for shape in dict.fromkeys(batch))
        ast.fix_missing_locations(module)
        code = compile(module, "<expression>", "exec")
    except RecursionError:
        raise ExpressionError("expression nested too deeply", 0, source) from None
    namespace = compiler.namespace
    exec(code, namespace)  # our own AST, run with no builtins
    function = namespace["_cel"]
    assert callable(function)
    forms = {shape: cast("Callable[..., list[Any]]", namespace[f"_cel_{shape}"]) for shape in batch}
    return Expression(source, names, function, python, result_type, forms, cost)
