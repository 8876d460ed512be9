"""Synchronisation built from dataflows: a re-usable :class:`Barrier` and a :class:`Sequencer`.

Both build a small dataflow of their own on the worker and use its progress tracking, with no
side channel between the workers: a barrier is an input and a probe; a sequencer is a source,
an exchange and a sink.
"""

from operators.sync.barrier import Barrier
from operators.sync.sequencer import Clock, Sequenced, Sequencer, monotonic_clock

__all__ = ["Barrier", "Clock", "Sequenced", "Sequencer", "monotonic_clock"]
