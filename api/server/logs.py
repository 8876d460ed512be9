"""Structured logs: one JSON object per line, with the time, level, logger and message."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web import BaseRequest, StreamResponse


class JsonFormatter(logging.Formatter):
    """Formats a record as a JSON line; extra fields given to the logger are included."""

    _STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
        "message",
        "asctime",
    }

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update((k, v) for k, v in record.__dict__.items() if k not in self._STANDARD)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(fmt: str = "json", level: int = logging.INFO) -> None:
    """Log to standard error as JSON lines (``json``) or plain text (``text``)."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


ACCESS_LOG_MODES = ("all", "control", "off")
"""What the access log records: every request, control-plane requests and errors, nothing."""


def _data_plane(request: BaseRequest) -> bool:
    """Whether ``request`` is one producers send by the thousand per second.

    A push or an advance (``POST .../sessions/{session}/push`` or ``/advance``), or a
    stage (``PUT .../inputs/{input}/transactions/{txn}``).
    """
    path = request.path
    if request.method == "POST":
        return path.endswith(("/push", "/advance"))
    return request.method == "PUT" and "/transactions/" in path


class AccessLogger(AbstractAccessLogger):
    """One JSON-ready log record per request, with its method, path, status and duration.

    In ``control`` mode (the default of ``frontier serve``) a successful data-plane request
    (a push, stage or advance, which producers send by the thousand per second, and which
    ``/metrics`` counts) is not logged; every other request, and every error, is.
    """

    mode = "control"

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        """Log ``request`` unless the mode leaves it out."""
        status = response.status
        if self.mode == "control" and status < 400 and _data_plane(request):
            return
        self.logger.info(
            "%s %s %s",
            request.method,
            request.path,
            status,
            extra={
                "method": request.method,
                "path": request.path,
                "status": status,
                "duration_ms": round(time * 1000, 3),
                "remote": request.remote,
            },
        )

    @property
    def enabled(self) -> bool:
        """Whether anything is logged at all."""
        return self.mode != "off" and self.logger.isEnabledFor(logging.INFO)


def access_logger_class(mode: str) -> type[AccessLogger]:
    """An :class:`AccessLogger` class in ``mode`` (one of :data:`ACCESS_LOG_MODES`)."""
    if mode not in ACCESS_LOG_MODES:
        raise ValueError(f"access log mode {mode!r} is not one of {', '.join(ACCESS_LOG_MODES)}")
    return type("AccessLogger", (AccessLogger,), {"mode": mode})
