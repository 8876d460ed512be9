"""Progress tracking: timestamps, antichains, reachability, and the reference computations.

Pure and synchronous: no asyncio, no I/O. Everything public is importable from here.
"""

from service.progress.antichain import Antichain, MutableAntichain
from service.progress.change_batch import ChangeBatch
from service.progress.location import Location, Source, Target, location_key
from service.progress.reachability import (
    Builder,
    Connectivity,
    CycleError,
    Holder,
    Tracker,
    all_to_all,
    strongly_connected,
)
from service.progress.reference import find_cycles, frontier, summarize
from service.progress.timestamp import (
    MAX_TIME,
    PathSummary,
    Product,
    Timestamp,
    check_time,
    followed_by,
    identity_like,
    is_identity,
    less_equal,
    less_than,
    minimum_like,
    results_in,
    same_domain,
)

__all__ = [
    "MAX_TIME",
    "Antichain",
    "Builder",
    "ChangeBatch",
    "Connectivity",
    "CycleError",
    "Holder",
    "Location",
    "MutableAntichain",
    "PathSummary",
    "Product",
    "Source",
    "Target",
    "Timestamp",
    "Tracker",
    "all_to_all",
    "check_time",
    "find_cycles",
    "followed_by",
    "frontier",
    "identity_like",
    "is_identity",
    "less_equal",
    "less_than",
    "location_key",
    "minimum_like",
    "results_in",
    "same_domain",
    "strongly_connected",
    "summarize",
]
