"""The scope users build dataflows in: the engine's scope plus stream-building methods."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from operators.capture.pushers import EventReader
from operators.capture.replay import replay_into
from operators.feedback import LoopHandle, feedback
from operators.input import InputHandle, new_input
from operators.runtime import Scope as EngineScope
from operators.runtime import register_scope_type
from operators.stream import Stream


class Scope(EngineScope):
    """A scope under construction, with the methods that start streams in it."""

    def new_input(self, name: str = "Input") -> tuple[InputHandle, Stream]:
        """A new input: the handle to send records with, and their stream."""
        return new_input(self, name)

    def replay_into(self, streams: Sequence[EventReader], name: str = "Replay") -> Stream:
        """Replay captured streams as one stream (this worker takes its share of them)."""
        return replay_into(self, streams, name)

    def feedback(self, summary: Hashable, name: str = "Feedback") -> tuple[LoopHandle, Stream]:
        """A loop edge advancing records by ``summary``; connect it with ``connect_loop``."""
        return feedback(self, summary, name)


register_scope_type(Scope)
