"""The engine: worker coroutines, scopes as operators, channels, and progress broadcast.

``await execute(fn, workers=N)`` runs ``fn(worker)`` on N workers on the running event loop;
``run(fn, workers=N)`` does the same on a fresh uvloop loop. The stream-building API lives one
layer up, in :mod:`operators`.
"""

from operators.runtime.channels import ExchangePusher, PipelinePusher, Tee, stable_hash
from operators.runtime.containers import Batch, Columns, rows_of
from operators.runtime.fabric import Fabric, Mailbox
from operators.runtime.operate import Interest, Operate, SharedProgress
from operators.runtime.subgraph import Subgraph, SubgraphBuilder
from operators.runtime.time_domain import INTEGERS, IterativeRefinement, Refinement, TimeDomain
from operators.runtime.worker import Scope, Worker, execute, register_scope_type, run

__all__ = [
    "INTEGERS",
    "Batch",
    "Columns",
    "ExchangePusher",
    "Fabric",
    "Interest",
    "IterativeRefinement",
    "Mailbox",
    "Operate",
    "PipelinePusher",
    "Refinement",
    "Scope",
    "SharedProgress",
    "Subgraph",
    "SubgraphBuilder",
    "Tee",
    "TimeDomain",
    "Worker",
    "execute",
    "register_scope_type",
    "rows_of",
    "run",
    "stable_hash",
]
