"""Locations in a dataflow graph: operator input ports (targets) and output ports (sources).

Node 0 of a scope stands for the world outside the scope: its *sources* are the scope's
inputs (records enter the scope through them) and its *targets* are the scope's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """An output port ``port`` of operator ``node``: where records and capabilities start.

    >>> Source(1, 0) == Source(1, 0), Source(1, 0) == Target(1, 0)
    (True, False)
    """

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Source({self.node}, {self.port})"


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """An input port ``port`` of operator ``node``: where records arrive.

    >>> sorted([Target(2, 0), Target(1, 1)])
    [Target(1, 1), Target(2, 0)]
    """

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Target({self.node}, {self.port})"


Location = Source | Target
"""Either kind of port."""


def location_key(location: Location) -> tuple[int, int, int]:
    """A sort key over both kinds: by node, then targets before sources, then port.

    >>> sorted([Source(1, 0), Target(1, 0), Source(0, 0)], key=location_key)
    [Source(0, 0), Target(1, 0), Source(1, 0)]
    """
    return (location.node, 0 if isinstance(location, Target) else 1, location.port)
