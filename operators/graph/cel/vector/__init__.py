"""CEL on columns: a checked expression compiled to Arrow compute kernels over a whole batch.

The second backend of :mod:`operators.graph.cel`. Given the Arrow types of its variables
(``r`` a struct, or any type; ``acc``; ``key``), :func:`compile_vector` compiles an
:class:`~operators.graph.cel.Expression` to a :class:`VectorExpression`, whose values on a
batch are one Arrow array of a type known before any batch (:attr:`VectorExpression.type`:
``{"key": r.key, "v": r.value * 2}`` gives a struct), with the rows on which it failed; or,
if some construct has no vector form, to :class:`NotVectorized`, saying which (the operator
then runs by rows, and the plan can say why)::

    vector = compile_vector(expression, {"r": batch.type})
    if isinstance(vector, NotVectorized):
        ...  # str(vector) == "not vectorized: the macro exists_one"
    values, failed = vector.evaluate(batch)         # failed: None, or a mask (true: failed)
    keep, failed = vector.predicate(batch)          # a filter: true where kept
    messages = vector.messages([batch], rows)       # the row backend's, for failed rows

Nothing is evaluated per row: each node of the expression is a few ``pyarrow.compute``
kernels on whole columns. The semantics are the row backend's, exactly (the tests hold the
two to the same value or error on every row): int64 and uint64 overflow, division by zero
and ``MIN / -1`` fail the row; ``/`` truncates and ``%`` takes the dividend's sign; ints and
doubles compare exactly; ``size`` counts code points; ``contains``, ``startsWith`` and
``endsWith`` are literal; ``matches`` is RE2's with a literal pattern; ``?:`` is lazy (an
error in the branch not taken is no error); ``&&`` and ``||`` absorb errors from either side
(Kleene's logic over errors as nulls); a null field is CEL's ``null``; equality is CEL's
heterogeneous equality. What fails a row is found before the kernels run (no kernel is
given an input it would raise on: see ``numbers.py``); an Arrow error nonetheless (none is
known) evaluates the batch by rows, with the row backend.

Lists, maps with literal string keys (structs), ``==`` and ``in`` on them, and the macros
``all``, ``exists``, ``map`` and ``filter`` run on columns too (see ``macros.py``). What has
no vector form (:class:`NotVectorized` says which): ``exists_one`` (the row backend stops at
its second true element); a macro in an expression whose comprehensions count steps per
element (one nested in another, ``matches`` in one) or pay for a string, list or map that
does not depend on the element; lists of values of several types; maps whose keys are not
literal strings; a map indexed by a value that is not a literal; ``matches`` with a pattern
that is not a literal, ``contains``/``startsWith``/``endsWith`` with an argument that is not
one; ``?:`` whose branches have different Arrow types; arithmetic on a uint64 field without
a uint operand (the row backend computes it as an int, beyond int64: write ``1u``); any
operation on a value of an Arrow type CEL has no operation on (timestamps, binary...; such a
value can be passed along); an expression compiled unchecked (``check=False``) that the
checker refuses.

Modules: ``values.py`` (columns of values with their failed rows, shapes), ``build.py`` (the
walk of the parse tree), ``numbers.py``, ``compare.py``, ``text.py``, ``structure.py``,
``macros.py`` (the operators, functions and macros). ``pyarrow`` is imported with this
package only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.codegen import _Compiler
from operators.graph.cel.core import EvaluationError, Expression, ExpressionError
from operators.graph.cel.lexer import _Lexer
from operators.graph.cel.syntax import _Binary, _Ident, _Node, _Parser
from operators.graph.cel.vector.build import Builder, _names
from operators.graph.cel.vector.values import (
    BOOL,
    Compiled,
    Env,
    NotVectorizedError,
    as_mask,
    column,
    conform,
    shape_of,
)
from operators.runtime.containers import Columns

__all__ = ["NotVectorized", "VectorExpression", "compile_added", "compile_vector"]

_UNLIMITED: Final = 1 << 30
"""Limits for parsing again an expression already checked within its own."""


@dataclass(frozen=True, slots=True)
class NotVectorized:
    """An expression with no vector form, and why: ``str()`` is ``not vectorized: <reason>``."""

    reason: str

    def __str__(self) -> str:
        return f"not vectorized: {self.reason}"


_UNCHECKED: Final = NotVectorized("compiled unchecked (check=False) and refused by the checker")
"""The vector builder walks the tree with the checker's static types, and has no form for what
an unchecked expression leaves to evaluation (an unknown name, an ill-typed operation)."""


Column: TypeAlias = "pa.Array | Columns"
"""A variable's values on a batch: an Arrow array, or a typed stream's container."""


@dataclass(frozen=True, slots=True)
class VectorExpression:
    """An expression compiled to kernels on columns (see the module).

    Attributes:
        expression: The expression (its row form: ``fn`` gives the messages of failed rows).
        types: The Arrow type of each variable's column, by name.
        type: The Arrow type of the values (ints ``int64``, uints ``uint64``, doubles
            ``float64``, strings ``string``, whatever width the columns had).
    """

    expression: Expression
    types: Mapping[str, pa.DataType]
    compiled: Compiled

    @property
    def type(self) -> pa.DataType:
        """The Arrow type of the values :meth:`evaluate` returns."""
        return self.compiled.shape.type

    def evaluate(self, *columns: Column, length: int | None = None) -> tuple[pa.Array, Any]:
        """The expression on every row of a batch.

        Args:
            columns: Each variable's column, in the order of ``expression.variables``.
            length: The number of rows, for an expression with no variables.

        Returns:
            ``(values, failed)``: the values, an array of :attr:`type` (null on a failed
            row), and ``None`` if no row failed, else a boolean array, true on the rows that
            failed (dropped and counted by the caller, or failing the dataflow).
        """
        env = self._env(columns, length)
        try:
            vec = self.compiled.run(env)
            values = column(vec.values, env.length)
            if values.type != self.type:  # nulls of no type: a null or failing expression
                values = pc.cast(values, self.type)
            failed = as_mask(vec.errors, env.length)
        except (pa.ArrowException, OverflowError):  # none known: what kernels raise on is guarded
            return self._by_rows(columns, env.length)
        if failed is not None:
            values = pc.if_else(failed, pa.scalar(None, self.type), values)
        return values, failed

    def predicate(self, *columns: Column, length: int | None = None) -> tuple[pa.Array, Any]:
        """The expression as a filter's: ``(keep, failed)``.

        Both are boolean arrays (``failed`` is ``None`` if no row failed); a row whose value
        is not a bool (a ``null``, or another type) fails.
        """
        values, failed = self.evaluate(*columns, length=length)
        if self.compiled.shape.kind != BOOL:
            return pa.repeat(pa.scalar(False), len(values)), pa.repeat(pa.scalar(True), len(values))
        failed = as_mask(pc.is_null(values), len(values))
        return (pc.fill_null(values, False) if failed is not None else values), failed

    def messages(
        self,
        columns: Sequence[Column],
        rows: Sequence[int] | pa.Array,
        check: Callable[[Any], object] | None = None,
    ) -> list[str | None]:
        """The row backend's error message for each of ``rows`` of the batch.

        It evaluates only those rows, record by record. ``check`` is applied to a row's
        value, as the operator does (a filter's: the value must be a bool), and its
        :class:`EvaluationError` is the message. ``None`` for a row on which neither fails
        (never for a row :meth:`evaluate` said failed: the tests hold the backends to it).
        """
        indices = pa.array(rows, pa.int64()) if not isinstance(rows, pa.Array) else rows
        arrays = [_array(values) for values in columns]
        records = list(zip(*(array.take(indices).to_pylist() for array in arrays), strict=True))
        if not arrays:
            records = [() for _ in range(len(indices))]
        return [_message(self.expression.fn, record, check) for record in records]

    def _env(self, columns: Sequence[Column], length: int | None) -> Env:
        names = self.expression.variables
        if len(columns) != len(names):
            raise TypeError(f"expected a column for each of {names}, got {len(columns)}")
        arrays = {name: _array(values) for name, values in zip(names, columns, strict=True)}
        for name, array in arrays.items():
            if array.type != self.types[name]:
                raise TypeError(f"{name} is {array.type}, not {self.types[name]} as compiled")
            if length is not None and len(array) != length:
                raise ValueError(f"{name} has {len(array)} rows, not {length}")
            length = len(array)
        if length is None:
            raise TypeError("an expression with no variables needs the batch's length")
        return Env(length, {name: conform(arrays[name], self.types[name]) for name in arrays})

    def _by_rows(self, columns: Sequence[Column], length: int) -> tuple[pa.Array, Any]:
        """The batch evaluated by the row backend, row by row (the net under the kernels)."""
        arrays = [_array(values).to_pylist() for values in columns]
        records = list(zip(*arrays, strict=True)) if arrays else [() for _ in range(length)]
        results: list[Any] = []
        failed: list[bool] = []
        for record in records:
            try:
                results.append(self.expression.fn(*record))
                failed.append(False)
            except EvaluationError:
                results.append(None)
                failed.append(True)
        mask = pa.array(failed, pa.bool_()) if any(failed) else None
        return pa.array(results, self.type), mask


def _array(values: Column) -> pa.Array:
    return values.array if isinstance(values, Columns) else values


def _message(
    fn: Callable[..., Any], record: tuple[Any, ...], check: Callable[[Any], object] | None
) -> str | None:
    try:
        value = fn(*record)
        if check is not None:
            check(value)
    except EvaluationError as error:
        return str(error)
    return None


def compile_vector(
    expression: Expression, types: Mapping[str, pa.DataType]
) -> VectorExpression | NotVectorized:
    """Compile ``expression`` to kernels on columns of the given Arrow types.

    Args:
        expression: A compiled expression. One compiled unchecked (``check=False``) is
            vectorized only if the checker takes it (then it is the same program): the
            builder has no form for what an unchecked expression leaves to evaluation.
        types: The Arrow type of each of its variables' columns, by name.

    Returns:
        The :class:`VectorExpression`, or :class:`NotVectorized` with the reason.

    Raises:
        ValueError: A variable of the expression has no type.
    """
    analysed = _analysed(expression)
    if isinstance(analysed, NotVectorized):
        return analysed
    tree, compiler = analysed
    return _built(expression, types, tree, compiler)


def _built(
    expression: Expression, types: Mapping[str, pa.DataType], node: _Node, compiler: _Compiler
) -> VectorExpression | NotVectorized:
    """``node`` (the expression's tree, or a part of it) compiled to kernels on columns."""
    missing = [name for name in expression.variables if name not in types]
    if missing:
        raise ValueError(f"no Arrow type for the variables {missing}")
    chosen = {name: types[name] for name in expression.variables}
    shapes = {name: shape_of(arrow) for name, arrow in chosen.items()}
    programs = {text: program for text, (_name, program) in compiler.patterns.items()}
    counted, probed = compiler.counts_per_element, frozenset(compiler.probed)
    builder = Builder(shapes, compiler.types, programs, expression.max_steps, counted, probed)
    try:
        compiled = builder.node(node)
    except NotVectorizedError as error:
        return NotVectorized(error.reason)
    return VectorExpression(expression, chosen, compiled)


def compile_added(
    fold: Expression, types: Mapping[str, pa.DataType], accumulator: str = "acc"
) -> VectorExpression | NotVectorized:
    """A fold ``acc + E`` (``E`` not reading ``acc``): ``E``'s vector form, what each row adds.

    A sum fold, recognized: folding rows into ``acc`` one by one adds up their ``E``, which
    a columnar sum computes in one kernel. The result evaluates ``E`` only; it is given a
    column for every variable of ``fold``, ``acc`` included (its values unread), so its
    :meth:`~VectorExpression.messages` are the row backend's for the whole fold.

    >>> from operators.graph.cel import compile_expression
    >>> fold = compile_expression("acc + r.n * 2", ("acc", "r"))
    >>> added = compile_added(fold, {"acc": pa.int64(), "r": pa.struct([("n", pa.int64())])})
    >>> added.evaluate(pa.array([0, 0]), pa.array([{"n": 1}, {"n": 5}]))[0].to_pylist()
    [2, 10]
    >>> print(compile_added(compile_expression("acc * r", ("acc", "r")), {}))
    not vectorized: the fold is not acc + <an expression of the record>
    """
    analysed = _analysed(fold)
    if isinstance(analysed, NotVectorized):
        return analysed
    tree, compiler = analysed
    adds = (
        isinstance(tree, _Binary)
        and tree.op == "+"
        and isinstance(tree.left, _Ident)
        and tree.left.name == accumulator
        and accumulator not in _names(tree.right)
    )
    if not adds:
        return NotVectorized(f"the fold is not {accumulator} + <an expression of the record>")
    assert isinstance(tree, _Binary)
    return _built(fold, types, tree.right, compiler)


def _analysed(expression: Expression) -> tuple[_Node, _Compiler] | NotVectorized:
    """The expression's parse tree, and the row backend's compiler having checked it.

    The compiler knows the nodes' static types (by node ``id``), the RE2 program of each
    literal ``matches`` pattern, and what its comprehensions count against the step limit.
    An expression compiled unchecked that the checker refuses is not vectorized.
    """
    source = expression.source
    tree = _Parser(source, _Lexer(source).tokens(), _UNLIMITED, _UNLIMITED).parse()
    compiler = _Compiler(
        source, expression.variables, _UNLIMITED, expression.max_steps, counting=False
    )
    try:
        compiler.module(tree)
    except ExpressionError:
        if expression.checked:  # pragma: no cover - it was checked when compiled
            raise
        return _UNCHECKED
    return tree, compiler
