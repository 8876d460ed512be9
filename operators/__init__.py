"""The engine: progress tracking, the runtime, the operator builder and the catalogue.

Importing this package makes ``worker.dataflow`` hand out :class:`Scope` objects with the
stream-building methods (``new_input``, ``feedback``, and through streams the catalogue).
The engine's entry points are re-exported, so ``from operators import run`` is all a user
needs::

    from operators import run

    async def work(worker):
        def build(scope):
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x * 2).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch([1, 2, 3])
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        return sorted(probe.frontier())

    assert run(work, workers=2) == [[1], [1]]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from operators.builder import OperatorBuilder
    from operators.capability import Capability, CapabilityError, InputCapability
    from operators.core import OperatorCore
    from operators.feedback import LoopHandle
    from operators.input import InputClosed, InputHandle
    from operators.ok_err import Err, Ok
    from operators.ports import InputPort, OutputPort, Session
    from operators.probe import ProbeHandle
    from operators.runtime import Worker, execute, run
    from operators.scope import Scope
    from operators.stream import Stream
    from operators.sync import Barrier, Sequencer

__all__ = [
    "Barrier",
    "Capability",
    "CapabilityError",
    "Err",
    "InputCapability",
    "InputClosed",
    "InputHandle",
    "InputPort",
    "LoopHandle",
    "Ok",
    "OperatorBuilder",
    "OperatorCore",
    "OutputPort",
    "ProbeHandle",
    "Scope",
    "Sequencer",
    "Session",
    "Stream",
    "Worker",
    "execute",
    "run",
]


def __getattr__(name: str) -> Any:
    """Load the engine on first use of one of its public names (see :mod:`operators.public`).

    Lazily, so that ``import operators.progress`` does not load the runtime: the progress
    core is pure.
    """
    if name in __all__:
        return getattr(importlib.import_module("operators.public"), name)
    raise AttributeError(f"module 'operators' has no attribute {name!r}")
