"""Loaded by every Python process of a driver the Spark tests start (its ``PYTHONPATH``).

With ``FRONTIER_STOP_BEFORE_COMMIT`` set to a path, the Frontier sink's job commit writes
that file and waits instead of committing: every task has staged its rows, and the test
kills the driver there. With ``FRONTIER_PAUSE_BEFORE_COMMIT`` set to a path, it writes that
file and waits until the file ``<path>.go`` exists, then commits: the test does something
to the server meanwhile (kills it, say).
"""

import os

_MARKER = os.environ.get("FRONTIER_STOP_BEFORE_COMMIT")
_PAUSE = os.environ.get("FRONTIER_PAUSE_BEFORE_COMMIT")

if _MARKER:
    import time

    from api.spark import sink

    def _stop(self: object, messages: object) -> None:
        with open(_MARKER, "w") as marker:
            marker.write("staged")
        while True:  # killed here
            time.sleep(1)

    sink.FrontierWriter.commit = _stop  # type: ignore[method-assign,assignment]

if _PAUSE:
    import time

    from api.spark import sink

    _commit = sink.FrontierWriter.commit

    def _pause(self: sink.FrontierWriter, messages: list[object]) -> None:
        with open(_PAUSE, "w") as marker:
            marker.write("staged")
        while not os.path.exists(_PAUSE + ".go"):
            time.sleep(0.05)
        _commit(self, messages)  # type: ignore[arg-type]

    sink.FrontierWriter.commit = _pause  # type: ignore[method-assign,assignment]
