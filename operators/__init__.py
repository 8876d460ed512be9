"""The operator builder and the catalogue of operators, over the engine in service.runtime.

Importing this package makes ``worker.dataflow`` hand out :class:`Scope` objects with the
stream-building methods (``new_input``, ``feedback``, and through streams the catalogue).
"""

from operators.capability import Capability, CapabilityError, InputCapability
from operators.core import OperatorBuilder, OperatorCore
from operators.feedback import LoopHandle
from operators.input import InputClosed, InputHandle
from operators.ok_err import Err, Ok
from operators.ports import InputPort, OutputPort, Session
from operators.probe import ProbeHandle
from operators.scope import Scope
from operators.stream import Stream

__all__ = [
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
    "Session",
    "Stream",
]
