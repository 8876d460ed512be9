"""The engine: worker coroutines, scopes as operators, channels, and progress broadcast.

``await execute(fn, workers=N)`` runs ``fn(worker)`` on N workers on the running event loop;
``run(fn, workers=N)`` does the same on a fresh uvloop loop. The stream-building API lives one
layer up, in :mod:`operators`.
"""

from service.runtime.channels import ExchangePusher, PipelinePusher, Tee, stable_hash
from service.runtime.fabric import Fabric, Mailbox
from service.runtime.operate import Interest, Operate, SharedProgress
from service.runtime.scope import Scope
from service.runtime.subgraph import Subgraph, SubgraphBuilder
from service.runtime.time_domain import INTEGERS, IterativeRefinement, Refinement, TimeDomain
from service.runtime.worker import Worker, execute, register_scope_type, run

__all__ = [
    "INTEGERS",
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
    "run",
    "stable_hash",
]
