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
selection ``a.f`` (a field name may be a reserved word, ``m.as``, or backquoted, ``m.`a/b```),
indexing ``a[i]``, calls ``f(x)`` and methods ``x.f(y)``. Literals: ints
(``42``, ``0x2A``), uints (``42u``), doubles (``1.5``, ``.5``, ``1e3``), strings in single or
double quotes, triple-quoted, raw (``r"\d"``), with the escapes ``\n \t \\ \" \' \uXXXX``
(all of CEL's: ``\a \b \f \r \v \? \` \xHH \UXXXXXXXX \ooo`` too), ``true``,
``false``, ``null``, lists ``[a, b]`` and maps ``{"k": v}``. Comments run from ``//`` to the
end of the line.

**Functions**: ``size(x)``/``x.size()``, ``int(x)``, ``uint(x)``, ``double(x)``,
``string(x)``, ``bool(x)``, ``dyn(x)``, ``has(a.f)``; string methods ``startsWith``,
``endsWith``, ``contains``, ``matches`` (RE2 syntax and semantics, as CEL specifies, searched
for anywhere in the string; RE2's time is linear in the string: a literal pattern is compiled
once, at submission, any other when evaluated, through a bounded cache), and the extensions
``lower()`` and ``upper()`` (not standard CEL); cel-go's strings extension (``charAt``, ``indexOf``,
``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``trim``, ``replace``, ``split``,
``substring``, ``reverse``, ``format``, ``join`` on lists, ``strings.quote``) and
``math.greatest``/``math.least``, as cel-go evaluates them (``extensions.py``). Macros on
lists (and on maps, whose keys they range over): ``all``, ``exists``, ``exists_one``,
``map`` (two and three argument forms) and ``filter``, e.g. ``xs.map(x, x * 2)``.

**Values**: records are what JSON decodes to: ``int``, ``float`` (CEL ``double``), ``str``,
``bool``, ``None`` (``null``), ``list`` and ``dict`` (CEL ``map``); tuples are taken as lists.
``r.f`` on a map is the lookup of key ``"f"``. The static types of literals and operators are
checked at submission; values read from records are ``dyn`` and checked when evaluated.

**Unchecked**: ``compile_expression(..., check=False)`` skips the checker, as CEL allows
(cel-go's ``disable_check``; the service never does). What the checker would refuse (an
unknown identifier, function or method, a wrong number of arguments, an operand or argument
of a type with no overload) is instead an :class:`EvaluationError` when that part of the
expression is evaluated, with the message the checker would have given (``unknown identifier
'x'``, ``no such overload: int + string``, ``the operands of '&&' must be bool, not int``):
an error value, which ``&&``, ``||``, ``?:``, ``all`` and ``exists`` absorb or skip as for
any other (``x || true`` is ``true``, ``false && 32`` is ``false``). A part refused so
evaluates none of its operands, except where a bool is wanted (an operand of ``&&`` or
``||``, the condition of ``?:``, a macro's predicate): the value of another type is
evaluated first, so its own error wins. Everything else is as checked: the syntax, variable
names, literals, a literal ``matches`` pattern, duplicate literal map keys and every limit
(length, depth, nodes, macro depth, cost, steps). The cost estimate counts a refused part
as one node: it raises at once, evaluating nothing. What the checker takes compiles to the
same program either way. :attr:`Expression.checked` says which; the vector backend
compiles an unchecked expression only if the checker takes it. A variable may be named
``true``, ``false`` or ``null`` (as a CEL environment may declare), but it is never read:
those words are always the literals (the spec: "Named constants should never be shadowed by
identifiers").

**Semantics** follow CEL, with these choices:

* Arithmetic needs operands of one type, as in CEL: ``1 + 2.0`` does not compile and
  ``r.x * 2`` fails on a record whose ``x`` is a double. ``int`` results are checked against
  the int64 range after every ``+``, ``-``, ``*``, ``/`` and unary ``-`` (``uint`` against the
  uint64 range) and raise ``integer overflow``. ``/`` and ``%`` on ints truncate toward zero
  (``-7 / 2 == -3``, ``-7 % 2 == -1``); ``/`` and ``%`` by zero fail, and so do
  ``-9223372036854775808 / -1`` and ``% -1`` (overflow, as in cel-go); ``/`` on doubles
  follows IEEE 754 (``1.0 / 0.0`` is infinity); there is no ``%`` on doubles.
* Ordering compares ints, uints and doubles numerically across types (an int and a double as
  doubles, as cel-go and the spec's cases: ``9223372036854775807 < 9223372036854775808.0`` is
  false), strings by code point and bools (``false < true``); anything else is an error.
  Equality is CEL's heterogeneous equality: values of different types are unequal except
  numbers, which are equal if their values are, exactly; lists and maps compare element by
  element. A list is indexed by an int, a uint or a whole double (``[1, 2][1.0]``).
* ``&&`` and ``||`` absorb errors from either side, as CEL says: ``false && e`` and
  ``e && false`` are ``false``, ``true || e`` and ``e || true`` are ``true``, whatever ``e``
  fails with; else an operand's error (the leftmost) is the result. ``all`` and ``exists``
  likewise: an element that decides them (false for ``all``, true for ``exists``) decides
  them even after an element that failed. Their operands must be bools (one that is not, when
  evaluated, is an error like any other). The compiled function evaluates left to right,
  short-circuiting, and only on a record where that fails evaluates it again absorbing
  errors, so records on which nothing fails pay nothing for the rule. ``?:`` evaluates only
  the branch taken (an error in the other is no error). ``exists_one`` evaluates every
  element (an error after its second true element is still the result).
* uints are Python ints whose type is known statically; a uint read from a record (there are
  none in JSON) or passed through a list is an int.
* ``matches`` is RE2's: no backreferences or lookaround (a literal pattern using them does not
  compile), ``\z`` for the end of the text (Python's ``\Z``), ``$`` only at the end of the text
  (not before a final newline), ``\d``, ``\w``, ``\s`` and ``\b`` ASCII-only, repetitions
  up to 1000. A pattern that is not a literal and does not compile fails the record.

**Columns**: :mod:`operators.graph.cel.vector` compiles the same checked expression, given
the Arrow types of its variables, to ``pyarrow.compute`` kernels over a whole batch, with
these semantics row for row (or says which construct has no vector form).

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
root selection (``.r``), and the extensions but strings and ``math.greatest``/``least``. Maps do not
tell the keys ``1`` and ``true`` apart (Python's dicts do not).
"""

from __future__ import annotations

import ast
import keyword
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from operators.graph.cel.codegen import _Compiler
from operators.graph.cel.core import (
    BATCH_SHAPES,
    MAX_COST,
    MAX_RECORD_BYTES,
    MAX_STEPS,
    EvaluationError,
    Expression,
    ExpressionError,
)
from operators.graph.cel.cost import _Estimator
from operators.graph.cel.lexer import _RESERVED, _Lexer
from operators.graph.cel.runtime import hashable
from operators.graph.cel.syntax import _Node, _Parser

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
    check: bool = True,
) -> Expression:
    """Parse, check and compile a CEL expression into a Python function.

    Args:
        source: The expression, e.g. ``'r.value * 2 > 10 && r.key != "x"'``.
        variables: The names the expression may refer to; the compiled function takes their
            values positionally in this order. Each must be a letter followed by letters,
            digits and underscores, neither a Python keyword nor a CEL reserved word; one named
            ``true``, ``false`` or ``null`` is never read (those are always the literals).
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
        check: Whether to type-check the expression (the default, which the service always
            uses); ``False`` is CEL's unchecked evaluation (see "Unchecked" above).

    Returns:
        The compiled :class:`Expression`.

    Raises:
        ExpressionError: The source does not compile: a lexical or syntax error, an unknown
            identifier, function or method, a wrong number of arguments, a type error visible
            without a record (these four only if ``check``), an out-of-range literal, a literal
            ``matches`` pattern RE2 does not take, or a limit exceeded (the estimated cost
            included).
        ValueError: A variable name is invalid or repeated.
        TypeError: ``source`` is not a string, or ``variables`` is a string.
    """
    if not isinstance(source, str):
        raise TypeError(f"an expression is a string, not {type(source).__name__}")
    names = _check_variables(variables)
    sizes = (max_length, max_depth, max_nodes, max_macro_depth)
    limits = _Limits(*sizes, max_cost, max_steps, max_record_bytes, check)
    return _compile(source, names, limits, batch)


@dataclass(frozen=True, slots=True)
class _Limits:
    """The limits :func:`compile_expression` was given (see its arguments)."""

    max_length: int
    max_depth: int
    max_nodes: int
    max_macro_depth: int
    max_cost: float | None
    max_steps: int
    max_record_bytes: int
    check: bool


def _compile(
    source: str, names: tuple[str, ...], limits: _Limits, batch: Sequence[str]
) -> Expression:
    """Parse, check and compile ``source`` (see :func:`compile_expression`)."""
    if len(source) > limits.max_length:
        raise ExpressionError(
            f"expression too long ({len(source)} characters, the limit is {limits.max_length})",
            limits.max_length,
            source,
        )
    try:
        tokens = _Lexer(source).tokens()
        tree = _Parser(source, tokens, limits.max_depth, limits.max_nodes).parse()
        compiler, module, result_type = _check(source, names, tree, limits)
        cost = _estimate(source, compiler, tree, limits)
        python = ast.unparse(ast.fix_missing_locations(module))
        if batch and not names:
            raise ValueError("batch forms need a variable to range over")
        module.body.extend(compiler.batch(shape) for shape in dict.fromkeys(batch))
        ast.fix_missing_locations(module)
        with warnings.catch_warnings():  # `1 is None`: an identity test with None, True, False
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compile(module, "<expression>", "exec")
    except RecursionError:
        raise ExpressionError("expression nested too deeply", 0, source) from None
    namespace = compiler.namespace
    exec(code, namespace)  # our own AST, run with no builtins
    function = namespace["_cel"]
    assert callable(function)
    forms = {shape: cast("Callable[..., list[Any]]", namespace[f"_cel_{shape}"]) for shape in batch}
    return Expression(
        source, names, function, python, result_type, forms, cost, limits.max_steps, limits.check
    )


def _check(
    source: str, names: tuple[str, ...], tree: _Node, limits: _Limits
) -> tuple[_Compiler, ast.Module, str]:
    """Check and compile the parse tree: once, then again counting steps if some work must be."""
    max_macro_depth, max_steps, check = limits.max_macro_depth, limits.max_steps, limits.check
    compiler = _Compiler(source, names, max_macro_depth, max_steps, counting=False, checked=check)
    module, result_type = compiler.module(tree)
    if compiler.charges:  # made again, counting (with a counter per record if need be)
        cell = compiler.needs_cell
        compiler = _Compiler(
            source, names, max_macro_depth, max_steps, counting=True, cell=cell, checked=check
        )
        module, result_type = compiler.module(tree)
    return compiler, module, result_type


def _estimate(source: str, compiler: _Compiler, tree: _Node, limits: _Limits) -> float:
    """The expression's estimated cost, refused if over ``limits.max_cost``."""
    max_cost, max_record_bytes = limits.max_cost, limits.max_record_bytes
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
    return cost
