"""Everything a library user needs, in one place: what ``from operators import ...`` gives.

Importing it loads the engine (the runtime, asyncio, uvloop) and every operator, and makes
``worker.dataflow`` hand out scopes with the stream-building methods. The package's
``__init__`` loads it only when one of these names is first asked for, so that importing the
progress core (``operators.progress``) alone stays pure.
"""

import operators.catalogue  # noqa: F401 - attaches every operator's Stream methods
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
