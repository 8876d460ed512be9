"""Progress tracking: timestamps, antichains, reachability, and the reference computations.

Pure and synchronous: no asyncio, no I/O. Everything public is importable from here.
"""

from operators.progress.antichain import Antichain, MutableAntichain
from operators.progress.change_batch import ChangeBatch
from operators.progress.location import Location, Source, Target, location_key
from operators.progress.reachability import (
    Builder,
    Connectivity,
    CycleError,
    Holder,
    Tracker,
    all_to_all,
    strongly_connected,
)
from operators.progress.reference import find_cycles, frontier, summarize
from operators.progress.time_codec import TimeFormatError, decode_time, encode_time
from operators.progress.timestamp import (
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
    "TimeFormatError",
    "Timestamp",
    "Tracker",
    "all_to_all",
    "check_time",
    "decode_time",
    "encode_time",
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
