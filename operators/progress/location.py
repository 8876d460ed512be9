"""Locations in a dataflow graph: operator input ports (targets) and output ports (sources).

Node 0 of a scope stands for the world outside the scope: its *sources* are the scope's
inputs (records enter the scope through them) and its *targets* are the scope's outputs.

Both kinds are tuples ``(node, kind, port)`` underneath, so hashing, equality and ordering
run in C (locations are dictionary keys everywhere), while the ``kind`` field keeps
``Source(1, 0)`` and ``Target(1, 0)`` apart. The natural order sorts by node, then targets
before sources, then port. (A location also equals the plain tuple with the same three
fields; the engine never mixes the two.)
"""

from __future__ import annotations

from operator import itemgetter

_TARGET = 0
_SOURCE = 1


class Source(tuple[int, int, int]):
    """An output port ``port`` of operator ``node``: where records and capabilities start.

    >>> Source(1, 0) == Source(1, 0), Source(1, 0) == Target(1, 0)
    (True, False)
    >>> Source(3, 1).node, Source(3, 1).port
    (3, 1)
    """

    __slots__ = ()

    def __new__(cls, node: int, port: int) -> Source:
        """The output port ``port`` of operator ``node``."""
        return tuple.__new__(cls, (node, _SOURCE, port))

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[2])

    node = property(itemgetter(0), doc="The operator's index in its scope.")
    port = property(itemgetter(2), doc="The output port's index on the operator.")

    def __repr__(self) -> str:
        return f"Source({self[0]}, {self[2]})"


class Target(tuple[int, int, int]):
    """An input port ``port`` of operator ``node``: where records arrive.

    >>> sorted([Source(1, 0), Target(2, 0), Target(1, 1)])
    [Target(1, 1), Source(1, 0), Target(2, 0)]
    """

    __slots__ = ()

    def __new__(cls, node: int, port: int) -> Target:
        """The input port ``port`` of operator ``node``."""
        return tuple.__new__(cls, (node, _TARGET, port))

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[2])

    node = property(itemgetter(0), doc="The operator's index in its scope.")
    port = property(itemgetter(2), doc="The input port's index on the operator.")

    def __repr__(self) -> str:
        return f"Target({self[0]}, {self[2]})"


Location = Source | Target
"""Either kind of port."""


def location_key(location: Location) -> tuple[int, int, int]:
    """A sort key over both kinds: by node, then targets before sources, then port.

    Locations sort this way on their own; the key exists for ``sorted(..., key=...)`` over
    structures that contain locations.

    >>> sorted([Source(1, 0), Target(1, 0), Source(0, 0)], key=location_key)
    [Source(0, 0), Target(1, 0), Source(1, 0)]
    """
    return (location[0], location[1], location[2])
