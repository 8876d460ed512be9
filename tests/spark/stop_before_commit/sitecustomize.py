"""Loaded by every Python process of the crash test's first driver (its ``PYTHONPATH``).

With ``FRONTIER_STOP_BEFORE_COMMIT`` set to a path, the Frontier sink's job commit writes
that file and waits instead of committing: every task has staged its rows, and the test
kills the driver there.
"""

import os

_MARKER = os.environ.get("FRONTIER_STOP_BEFORE_COMMIT")

if _MARKER:
    import time

    from api.spark import sink

    def _stop(self: object, messages: object) -> None:
        with open(_MARKER, "w") as marker:
            marker.write("staged")
        while True:  # killed here
            time.sleep(1)

    sink.FrontierWriter.commit = _stop  # type: ignore[method-assign,assignment]
