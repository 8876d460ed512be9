"""The service core: dataflows created from graphs, producers feeding them, outputs read out.

Everything here is plain Python on the event loop the workers run on; the HTTP and WebSocket
edges in :mod:`api` translate requests into calls on :class:`DataflowManager` and turn what
it answers (the typed views of :mod:`service.app.views`, its errors, and the captured events
of outputs) into wire formats. This package is all of the engine that :mod:`api` sees: the
operator catalogue, the graph's shape checker (:func:`parse_graph`, which the API's graph model
delegates to) and the format of captured events reach the API from here.
"""

from operators.capture.event import Event, EventFormatError, Messages, Progress, event_to_json
from operators.graph import GraphError, GraphSpec, Problem, describe_catalogue, parse_graph
from operators.graph.spec import escape
from operators.progress import (
    MAX_TIME,
    Product,
    TimeFormatError,
    check_time,
    decode_time,
    encode_time,
)
from operators.runtime import Batch as Container
from operators.runtime import Columns as RecordColumns
from operators.runtime.cluster import ClusterError
from service.app.dataflow import Dataflow, Identity
from service.app.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    IdempotencyKeyReused,
    Invalid,
    LimitExceeded,
    NotFound,
    ServiceError,
    Unauthorized,
    Unavailable,
)
from service.app.frontiers import FrontierCodec, FrontierSink, FrontierWatch
from service.app.inputs import Columns, ProducerInput
from service.app.manager import DataflowManager
from service.app.outputs import OutputLog
from service.app.settings import Cluster, Limits, Settings
from service.app.subscribers import Subscriber
from service.app.views import (
    Ack,
    ConsumerView,
    DataflowPage,
    DataflowStats,
    DataflowSummary,
    DataflowView,
    InputState,
    InputView,
    LiveStats,
    OutputPage,
    OutputView,
    SessionView,
    SubscriberView,
)
from service.store import (
    ArrowRecords,
    Batch,
    BatchError,
    StoreError,
    arrow_records,
)
from service.store.typed import TypedRecords

DataflowRecord = Dataflow
"""The name a dataflow had before it was an object of its own (kept for callers)."""

__all__ = [
    "MAX_TIME",
    "Ack",
    "ArrowRecords",
    "BadRequest",
    "Batch",
    "BatchError",
    "Cluster",
    "ClusterError",
    "Columns",
    "Conflict",
    "ConsumerView",
    "Container",
    "Dataflow",
    "DataflowManager",
    "DataflowPage",
    "DataflowRecord",
    "DataflowStats",
    "DataflowSummary",
    "DataflowView",
    "Event",
    "EventFormatError",
    "Forbidden",
    "FrontierCodec",
    "FrontierSink",
    "FrontierWatch",
    "Gone",
    "GraphError",
    "GraphSpec",
    "IdempotencyKeyReused",
    "Identity",
    "InputState",
    "InputView",
    "Invalid",
    "LimitExceeded",
    "Limits",
    "LiveStats",
    "Messages",
    "NotFound",
    "OutputLog",
    "OutputPage",
    "OutputView",
    "Problem",
    "ProducerInput",
    "Product",
    "Progress",
    "RecordColumns",
    "ServiceError",
    "SessionView",
    "Settings",
    "StoreError",
    "Subscriber",
    "SubscriberView",
    "TimeFormatError",
    "TypedRecords",
    "Unauthorized",
    "Unavailable",
    "arrow_records",
    "check_time",
    "decode_time",
    "describe_catalogue",
    "encode_time",
    "escape",
    "event_to_json",
    "parse_graph",
]
