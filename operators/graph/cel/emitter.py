"""The code generator's state, its bindings, and how it counts steps (see :data:`MAX_STEPS`)."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, NoReturn

from operators.graph.cel.core import ExpressionError
from operators.graph.cel.emit import _call, _Code, _compare, _const, _if, _load, _store, _type_of
from operators.graph.cel.runtime import _RUNTIME
from operators.graph.cel.steps import _FREE_WORK
from operators.graph.cel.syntax import _Lit, _mentions, _Node
from operators.graph.cel.types import BOOL, DYN, LIST, NULL, STRING


@dataclass(slots=True)
class _Frame:
    """A comprehension's function being compiled."""

    items: str
    """The local naming its range (when it needs one)."""
    probes: list[tuple[ast.expr, int, bool]] = field(default_factory=list)
    """What its body works on once per element without depending on the element (see
    :meth:`_Compiler.repeated`): the value's code, the work per element and unit of its size,
    and whether that size is its elements, deep (else its characters, or top elements)."""


class _IllTyped(Exception):
    """What the type checker refuses, compiling unchecked (see :meth:`_Emitter.ill_typed`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_STEPS: Final = "_k"
"""The name of the record's step counter in the generated code: ``[steps left, the limit]``, made
per record, passed to every comprehension's function (only in code that needs one)."""


class _Emitter:
    """The compiler's state and what its parts share (its parts: ``_Calls``, ``_Operators``)."""

    def __init__(
        self,
        source: str,
        variables: tuple[str, ...],
        max_macro_depth: int,
        max_steps: int,
        *,
        counting: bool,
        cell: bool = False,
        checked: bool = True,
    ) -> None:
        self.source = source
        self.checked = checked
        """Whether what the checker refuses is refused now (else when evaluated: ill_typed)."""
        self.deferred: set[int] = set()
        """Nodes (by ``id``) compiled, unchecked, to raise the checker's error when evaluated."""
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
        self.counts_per_element = False
        """Whether some of it is counted per element (``matches`` in a comprehension, or a
        comprehension nested in another), not only as a comprehension starts (see
        :meth:`repeated`)."""
        self.probed: set[int] = set()
        """The nodes (by ``id``) whose values a comprehension pays for as it starts (see
        :meth:`repeated`): strings, lists and maps, by their size; nothing for other values."""
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
        self.absorbs = False
        """Whether the expression has an ``&&``, ``||``, ``all`` or ``exists``."""
        self.absorbing = False
        """Whether ``&&``, ``||``, ``all`` and ``exists`` are compiled to absorb errors as CEL
        says (the fallback of :meth:`_Compiler.module`), rather than to raise the first."""

    def fail(self, message: str, pos: int) -> NoReturn:
        raise ExpressionError(message, pos, self.source)

    def ill_typed(self, message: str, pos: int) -> NoReturn:
        """Refuse the node being compiled as the type checker does: unknown, or ill-typed.

        Checked, an :class:`ExpressionError` at ``pos``. Unchecked, :meth:`expr` catches it
        and compiles the node to an :class:`EvaluationError` with ``message`` when evaluated
        (CEL's checker is optional: unchecked, what it would refuse is an error value, which
        ``&&``, ``||``, ``?:``, ``all`` and ``exists`` may absorb or leave unevaluated).
        """
        if self.checked:
            self.fail(message, pos)
        raise _IllTyped(message)

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
            message = f"{what} must be bool, not {code.type}"
            if self.checked:
                self.fail(message, pos)
            # Unchecked: this operand (evaluated first: its own error wins) is an error, which
            # the operator may absorb (``32 && false`` is false) or not evaluate.
            return _call("_ill_typed", _const(message), code.expr)
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
        self.counts_per_element = self.counts_per_element or cell
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
        if not self.invariant(node):
            return
        counting = self.charged()
        self.probed.add(id(node))
        if counting:
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

    def node(self, node: _Node) -> _Code:
        """The code of ``node`` and its static type (by the compiler, which dispatches on it)."""
        raise NotImplementedError  # pragma: no cover

    def expr(self, node: _Node) -> _Code:
        if self.checked:
            code = self.node(node)
        else:
            try:
                code = self.node(node)
            except _IllTyped as error:  # the node's own check (its operands catch theirs)
                self.deferred.add(id(node))
                code = _Code(_call("_ill_typed", _const(error.message)), DYN)
        self.types[id(node)] = code.type
        links = self.probing.pop(id(node), 0)
        if links and code.type in (STRING, LIST, DYN):
            self.repeated(node, code, links)
        return code
