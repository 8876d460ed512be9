"""The access log: what each mode records, with which fields."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from api.server.logs import access_logger_class

PUSH = "/v1/dataflows/d1/inputs/in/sessions/s1/push"


def logged(
    mode: str, method: str, path: str, status: int, caplog: pytest.LogCaptureFixture
) -> list[logging.LogRecord]:
    logger = logging.getLogger("test.access")
    access = access_logger_class(mode)(logger, "")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="test.access"):
        if access.enabled:
            access.log(make_mocked_request(method, path), web.Response(status=status), 0.0025)
    return [r for r in caplog.records if r.name == "test.access"]


def test_control_mode_leaves_out_successful_data_plane_requests(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert logged("control", "POST", PUSH, 200, caplog) == []
    assert logged("control", "POST", PUSH.replace("push", "advance"), 200, caplog) == []
    stage = "/v1/dataflows/d1/inputs/in/transactions/t1"
    assert logged("control", "PUT", stage, 200, caplog) == []
    [aborted] = logged("control", "DELETE", stage, 200, caplog)
    assert aborted.getMessage() == f"DELETE {stage} 200"
    [refused] = logged("control", "POST", PUSH, 409, caplog)
    assert refused.getMessage() == f"POST {PUSH} 409"
    assert (refused.method, refused.path, refused.status, refused.duration_ms) == (  # type: ignore[attr-defined]
        "POST",
        PUSH,
        409,
        2.5,
    )
    [created] = logged("control", "POST", "/v1/dataflows", 201, caplog)
    assert created.getMessage() == "POST /v1/dataflows 201"


def test_all_mode_logs_every_request_and_off_mode_none(caplog: pytest.LogCaptureFixture) -> None:
    [push] = logged("all", "POST", PUSH, 200, caplog)
    assert push.getMessage() == f"POST {PUSH} 200"
    assert logged("off", "POST", "/v1/dataflows", 500, caplog) == []


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="access log mode 'some' is not one of all, control, off"):
        access_logger_class("some")
