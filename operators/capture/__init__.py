"""Captured streams: a stream as a history of events, and where those events go (seed 002).

``stream.capture_into(pusher)`` records a stream (:mod:`operators.capture_into`);
``scope.replay_into(readers)`` replays any number of captured streams as one
(:mod:`operators.replay_into`). This package holds what both operators and the service share,
with no dataflow in it: the events (documented in :mod:`operators.capture.event` and in
``docs/events.md``), their encoding, and the pushers and readers that carry them.
"""

from operators.capture.event import (
    Event,
    EventFormatError,
    Messages,
    Progress,
    decode_event,
    encode_event,
    frame,
)
from operators.capture.pushers import (
    CorruptEventLog,
    EventLink,
    EventPusher,
    EventReader,
    FileEventReader,
    FileEventWriter,
    LinkReader,
    StreamEventReader,
    StreamEventWriter,
)

__all__ = [
    "CorruptEventLog",
    "Event",
    "EventFormatError",
    "EventLink",
    "EventPusher",
    "EventReader",
    "FileEventReader",
    "FileEventWriter",
    "LinkReader",
    "Messages",
    "Progress",
    "StreamEventReader",
    "StreamEventWriter",
    "decode_event",
    "encode_event",
    "frame",
]
