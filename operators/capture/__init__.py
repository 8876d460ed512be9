"""Capture and replay: a stream as a history of events, and back (seed 002).

``stream.capture_into(pusher)`` records a stream; ``replay_into(scope, readers)`` replays any
number of captured streams as one. Events are documented in :mod:`operators.capture.event`
and in ``docs/events.md``.
"""

from operators.capture.capture import capture_into
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
from operators.capture.replay import replay_into

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
    "capture_into",
    "decode_event",
    "encode_event",
    "frame",
    "replay_into",
]
