"""The scope users build dataflows in: the engine's scope plus stream-building methods.

Unlike :class:`~operators.stream.Stream`'s operator methods, these are plain methods of a
subclass, which the runtime hands out once it is registered (``register_scope_type``): only
this layer and those above it know this scope, so it imports what its methods call, and no
import points back at it. The streams it starts have every method of the catalogue:
importing this module loads it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import operators.catalogue  # noqa: F401 - attaches the methods of the streams it starts
from operators.capture.pushers import EventReader
from operators.feedback import LoopHandle, feedback
from operators.input import InputHandle, new_input
from operators.replay_into import replay_into
from operators.runtime import Scope as EngineScope
from operators.runtime import register_scope_type
from operators.stream import Stream

if TYPE_CHECKING:
    import pyarrow as pa


class Scope(EngineScope):
    """A scope under construction, with the methods that start streams in it."""

    def new_input(
        self, name: str = "Input", schema: pa.Schema | None = None
    ) -> tuple[InputHandle, Stream]:
        """A new input: the handle to send records with, and their stream.

        With ``schema`` (a ``pa.Schema``), its records are objects with those fields and
        travel as Arrow columns (:class:`~operators.input.TypedInputHandle`).
        """
        return new_input(self, name, schema)

    def replay_into(self, streams: Sequence[EventReader], name: str = "Replay") -> Stream:
        """Replay captured streams as one stream (this worker takes its share of them)."""
        return replay_into(self, streams, name)

    def feedback(self, summary: Hashable, name: str = "Feedback") -> tuple[LoopHandle, Stream]:
        """A loop edge advancing records by ``summary``; connect it with ``connect_loop``."""
        return feedback(self, summary, name)


register_scope_type(Scope)
