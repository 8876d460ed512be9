"""The macros ``all``, ``exists``, ``map`` and ``filter`` over lists, on columns.

A batch's lists are flattened into one column of elements (``list_flatten``), which is a
batch of its own: the macro's body is evaluated on it once, the variable being the
elements and every other variable the body reads taken to its elements' rows
(``list_parent_indices``). What the body gives per element comes back per row by prefix
sums over the elements (a count per row is two ``take``s of a cumulative sum), or as new
lists with offsets made the same way:

* ``exists``: true if an element's predicate is true; else, if one failed (or is not a
  bool), the row fails; else false. ``all`` the same way round. An element that decides
  absorbs the others' errors, as in the row backend;
* ``map``: the row fails if the body fails on one of its elements; ``map(x, p, e)`` maps
  the elements ``p`` keeps, and ``e`` is evaluated on those only;
* ``filter``: the elements whose predicate is true; the row fails if the predicate fails on
  one of them.

Not vectorized: ``exists_one`` (the row backend stops at its second true element, so the
errors after it are none), a macro over a map (its keys), and any macro in an expression
whose comprehensions count steps (nested ones, ``matches`` in a body, work on values that do
not depend on the element: the row backend fails a record that needs too many, see
:data:`operators.graph.cel.MAX_STEPS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.vector.values import (
    ALWAYS,
    BOOL,
    BOOL_SHAPE,
    INT64,
    LIST,
    Compiled,
    Datum,
    Env,
    Shape,
    Vec,
    column,
    conform,
    either,
    per_row,
    shape_of,
    strict,
    typed,
    where,
)

_INT32: Final = pa.int32()
_ZERO: Final = pa.array([0], INT64)


def comprehension(
    name: str,
    target: Compiled,
    variable: str,
    parts: Sequence[Compiled],
    outer: Sequence[str],
) -> Compiled:
    """``target.name(variable, *parts)``; ``outer``: the other variables the body reads."""
    element = target.shape.type.value_type
    if name in ("all", "exists"):
        shape = BOOL_SHAPE
    elif name == "filter":
        shape = Shape(LIST, pa.list_(shape_of(element).type))
    else:
        shape = Shape(LIST, pa.list_(parts[-1].shape.type))
    ranges = target.run

    def run(env: Env) -> Vec:
        x = ranges(env)
        lists = x.values
        if pa.types.is_fixed_size_list(lists.type):
            lists = pc.cast(lists, pa.list_(lists.type.value_field))
        lengths = pc.fill_null(pc.cast(pc.list_value_length(lists), INT64), 0)
        parents = pc.list_parent_indices(lists)
        columns = {name: pc.take(env.columns[name], parents) for name in outer}
        columns[variable] = conform(pc.list_flatten(lists), element)
        elements = Env(len(parents), columns)
        if name in ("all", "exists"):
            vec = _decided(name == "all", parts[0], elements, lengths)
        elif name == "filter":
            vec = _filtered(parts[0], elements, lengths, variable, shape.type)
        else:
            vec = _mapped(parts, elements, lengths, shape.type)
        return Vec(vec.values, either(strict(x), vec.errors))

    return Compiled(shape, run)


def _judged(predicate: Compiled, elements: Env) -> tuple[Datum, Datum]:
    """A predicate on every element: its value, and where it failed.

    It fails where it holds no bool, too (a null, or a value of another type).
    """
    if predicate.shape.kind != BOOL:
        return pa.scalar(False), ALWAYS
    vec = predicate.run(elements)
    bad = strict(vec)
    value = where(bad, pa.scalar(False), vec.values)
    return value, (pa.scalar(False) if bad is None else bad)


def _decided(every: bool, predicate: Compiled, elements: Env, lengths: pa.Array) -> Vec:
    """``all`` (``every``) or ``exists``: an element that decides absorbs the others' errors."""
    value, bad = _judged(predicate, elements)
    deciding = pc.and_(pc.invert(value) if every else value, pc.invert(bad))
    decided = pc.greater(per_row(deciding, lengths), 0)
    failed = pc.and_(pc.invert(decided), pc.greater(per_row(bad, lengths), 0))
    return Vec(pc.invert(decided) if every else decided, failed)


def _filtered(
    predicate: Compiled, elements: Env, lengths: pa.Array, variable: str, arrow: pa.DataType
) -> Vec:
    """``filter``: the elements whose predicate is true, as new lists."""
    value, bad = _judged(predicate, elements)
    kept = column(value, elements.length)
    values = pc.filter(elements.columns[variable], kept)
    failed = pc.greater(per_row(bad, lengths), 0)
    return Vec(_lists(per_row(kept, lengths), values, arrow), failed)


def _mapped(parts: Sequence[Compiled], elements: Env, lengths: pa.Array, arrow: pa.DataType) -> Vec:
    """``map(x, e)``, or ``map(x, p, e)``: ``e`` on the elements ``p`` keeps, as new lists."""
    failed: Datum | None = None
    if len(parts) == 2:
        value, bad = _judged(parts[0], elements)
        failed = pc.greater(per_row(bad, lengths), 0)
        kept = column(value, elements.length)
        columns = {name: pc.filter(values, kept) for name, values in elements.columns.items()}
        lengths = per_row(kept, lengths)
        elements = Env(int(pc.sum(lengths).as_py() or 0), columns)
    vec = parts[-1].run(elements)
    values = column(typed(vec.values, arrow.value_type), elements.length)
    errors = vec.errors
    if errors is not None:
        failed = either(failed, pc.greater(per_row(errors, lengths), 0))
    return Vec(_lists(lengths, values, arrow), failed)


def _lists(lengths: pa.Array, values: pa.Array, arrow: pa.DataType) -> pa.Array:
    """Lists of ``lengths`` elements each, of ``values`` in order, of type ``arrow``."""
    offsets = pc.cast(pa.concat_arrays([_ZERO, pc.cumulative_sum(lengths)]), _INT32)
    return pa.ListArray.from_arrays(offsets, values, type=arrow)
