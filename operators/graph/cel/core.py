"""What every phase shares: the errors, the compiled expression and the limits.

:class:`Expression`, its batch forms (:data:`BATCH_SHAPES`) and the limits on cost and steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

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
            no Python call per value (a value that fails makes it evaluate the batch again
            with ``fn``, value by value, if ``&&`` or ``||`` may absorb the error). It raises
            :class:`EvaluationError` at the first value the expression fails on; what the
            others gave is then lost, so a caller that drops failures evaluates the batch
            again value by value with ``fn``.
        cost: The estimated cost of evaluating the expression on the largest record (see
            :data:`MAX_COST`).
        max_steps: The most steps evaluating it may take on one record (see :data:`MAX_STEPS`).
        checked: Whether it was type-checked at compile time (``compile_expression``'s
            ``check``, the default); unchecked, what the checker refuses fails when evaluated.
    """

    source: str
    variables: tuple[str, ...]
    fn: Callable[..., Any]
    python: str
    result_type: str
    batch: Mapping[str, Callable[..., list[Any]]] = field(default_factory=dict)
    cost: float = 0.0
    max_steps: int = MAX_STEPS
    checked: bool = True


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
