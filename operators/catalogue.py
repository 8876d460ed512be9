"""The catalogue: every operator module, so that each has attached its :class:`Stream` methods.

An operator's module attaches its methods to :class:`~operators.stream.Stream` when it is
imported (:func:`~operators.stream.attach`); importing this module imports them all. The
public names of :mod:`operators` load it, and so do the layers above the catalogue that
build with stream methods (:mod:`operators.scope`, :mod:`operators.sync`,
:mod:`operators.graph`). A new operator module is added here.
"""

from operators import (
    accumulate,
    aggregate,
    branch,
    broadcast,
    capture_into,
    columnar,
    concat,
    count_by,
    delay,
    enter_leave,
    exchange,
    filter,
    flat_map,
    generic,
    inspect,
    join,
    map,
    ok_err,
    partition,
)

__all__ = [
    "accumulate",
    "aggregate",
    "branch",
    "broadcast",
    "capture_into",
    "columnar",
    "concat",
    "count_by",
    "delay",
    "enter_leave",
    "exchange",
    "filter",
    "flat_map",
    "generic",
    "inspect",
    "join",
    "map",
    "ok_err",
    "partition",
]
