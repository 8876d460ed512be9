"""The page's live data, charts and stall warning, in headless chromium against a real server.

The page reads counts and rates from the stats subscription (``/v1/dataflows/{id}/stats``)
instead of polling the REST API; it charts each input's and output's throughput and each
output's completion latency from the samples the server keeps (so the minutes before the
page was opened show at once), exactly as the server sampled them; and a server whose
event loop stalls (a deployer's operator that blocks it, ``tests/e2e/plugins/stall.py``)
shows on the page: first as silence while it lasts, then as the stall the server reports.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import Server, running, within, ws_connect
from tests.e2e.ui.conftest import console_errors, page_state, wait_for
from tests.e2e.ui.test_page import call, node_names, with_session

CHAIN = {
    "name": "paced",
    "graph": {
        "nodes": {
            "numbers": {"op": "input"},
            "pass": {"op": "stall"},
            "keep": {"op": "filter", "expr": "r.n % 2 == 0"},
            "out": {"op": "output"},
        },
        "edges": [["numbers", "pass"], ["pass", "keep"], ["keep", "out"]],
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(
        tmp_path_factory.mktemp("charts"), "--operator-module", "tests.e2e.plugins.stall"
    ) as started:
        yield started


def open_page(browser: Any, server: Server, dataflow: str) -> None:
    browser.get(f"{server.url}/ui/#{dataflow}")
    nodes = set(CHAIN["graph"]["nodes"])  # type: ignore[call-overload]
    wait_for(
        browser,
        lambda b: page_state(b)["dataflow"] == dataflow and node_names(b) == nodes,
        20,
        f"the page to draw dataflow {dataflow}",
    )


def chart(browser: Any, key: str) -> Any:
    """What the page's chart ``key`` plots: its series' labels and its data columns."""
    return browser.execute_script("return window.frontierUI.chart(arguments[0])", key)


def loop_shown(browser: Any) -> Any:
    return browser.execute_script(
        "const el = document.getElementById('loop');"
        "return {state: el.dataset.state, text: el.textContent}"
    )


async def server_samples(server: Server, dataflow: str) -> list[Any]:
    """The samples the server keeps of the dataflow (the stats socket's first message)."""
    async with ws_connect(server, f"/v1/dataflows/{dataflow}/stats") as ws:
        first = orjson.loads(await within(ws.recv()))
    return list(first["samples"])


def test_the_charts_plot_the_server_s_samples(
    server: Server, browser: Any, screenshot: Callable[[str], Path]
) -> None:
    dataflow, base, session = with_session(server, CHAIN, "numbers")
    # Before the page opens: two seconds of records, and time 0 held open 1.5 s.
    push = f"{base}/inputs/numbers/sessions/{session}"
    call(server, "POST", f"{push}/push", {"seq": 1, "records": [[0, {"n": n}] for n in range(300)]})
    time.sleep(1.5)
    call(server, "POST", f"{push}/advance", {"time": 1})
    call(server, "POST", f"{push}/push", {"seq": 3, "records": [[1, {"n": n}] for n in range(100)]})
    call(server, "POST", f"{push}/advance", {"time": 2})
    time.sleep(1.2)  # one more sample: time 1's completion is in one
    open_page(browser, server, dataflow)
    keys = ["input:numbers:throughput", "output:out:throughput", "output:out:latency"]
    wait_for(browser, lambda b: all(chart(b, k) for k in keys), 5, "the three charts")
    wait_for(browser, lambda b: page_state(b)["samples"] >= 3, 5, "three samples")
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('#pace .chart')].map(c => ({key: c.dataset.chart,"
        " canvas: c.querySelector('canvas') !== null,"
        " title: c.querySelector('.u-title').textContent}))"
    )
    assert drawn == [
        {"key": keys[0], "canvas": True, "title": "numbers · records in/s"},
        {"key": keys[1], "canvas": True, "title": "out · records out/s"},
        {"key": keys[2], "canvas": True, "title": "out · completion latency"},
    ]
    # Exactly the server's samples: one point each, records per second of the interval.
    samples = asyncio.run(server_samples(server, dataflow))
    shown_in, shown_out, shown_latency = (chart(browser, k) for k in keys)
    assert shown_in["series"] == ["in"]
    assert shown_latency["series"] == ["mean", "max"]
    plotted = dict(zip(shown_in["data"][0], shown_in["data"][1], strict=True))
    out = dict(zip(shown_out["data"][0], shown_out["data"][1], strict=True))
    latency = {x: (m, top) for x, m, top in zip(*shown_latency["data"], strict=True)}
    common = [s for s in samples if s["at"] in plotted]
    assert len(common) >= 3
    for sample in common:
        assert plotted[sample["at"]] == pytest.approx(
            sample["records_in"]["numbers"] / sample["seconds"]
        )
        assert out[sample["at"]] == pytest.approx(sample["records_out"]["out"] / sample["seconds"])
        done = sample["latency"].get("out")
        expected = (None, None) if done is None else (done["mean"], done["max"])
        assert latency[sample["at"]] == pytest.approx(expected)
    # Every record in, half of them out (the filter), and time 0 held for 1.5 s.
    assert sum(plotted[s["at"]] * s["seconds"] for s in common) == pytest.approx(400)
    assert sum(s["records_out"]["out"] for s in samples) == 200
    longest = max(top for _, top in latency.values() if top is not None)
    assert 1.5 <= longest < 3.0
    # New samples keep coming, one point a second.
    before = len(chart(browser, keys[0])["data"][0])
    wait_for(browser, lambda b: len(chart(b, keys[0])["data"][0]) >= before + 2, 5, "new points")
    screenshot("charts")
    # Nothing polled: after the dataflow's description, everything came over the sockets.
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname"
        " + new URL(e.name).search).filter(p => p.startsWith('/v1/dataflows/'))"
    )
    assert fetched == [f"{base}?operators=true"], fetched
    assert console_errors(browser) == []


def test_a_stalled_event_loop_shows_on_the_page(
    server: Server, browser: Any, screenshot: Callable[[str], Path]
) -> None:
    dataflow, base, session = with_session(server, CHAIN, "numbers")
    open_page(browser, server, dataflow)
    calm = wait_for(browser, lambda b: (s := loop_shown(b))["state"] == "ok" and s, 5, "the lag")
    assert re.fullmatch(r"event loop lag \d+ ms", calm["text"]), calm
    # A record that blocks the server's event loop for 5 s.
    began = time.time()
    blocking = threading.Thread(
        target=call,
        args=(server, "POST", f"{base}/inputs/numbers/sessions/{session}/push"),
        kwargs={"body": {"seq": 1, "records": [[0, {"n": 0, "sleep": 5}]]}},
    )
    blocking.start()
    try:
        # While it lasts: no word from the server.
        silent = wait_for(
            browser, lambda b: (s := loop_shown(b))["state"] == "silent" and s, 6, "silence"
        )
        assert re.fullmatch(
            r"no word from the server for \d s: its event loop may be stalled", silent["text"]
        ), silent
        screenshot("silent")
        # Once it runs again: the stall, how long and when.
        stalled = wait_for(
            browser, lambda b: (s := loop_shown(b))["state"] == "stalled" and s, 10, "the stall"
        )
    finally:
        blocking.join(15)
    found = re.fullmatch(
        r"event loop stalled (\d\.\d\d) s at (\d\d:\d\d:\d\d) · lag (\d+ ms|\d\.\d\d s)",
        stalled["text"],
    )
    assert found, stalled
    # The loop watch's timer fires every 0.1 s: it sees a stall up to that much shorter.
    assert 4.85 <= float(found[1]) < 7.0
    at = browser.execute_script(
        "return new Date(arguments[0] * 1000).toLocaleTimeString([], {hour12: false})", began
    )
    assert abs(_seconds_of_day(found[2]) - _seconds_of_day(at)) <= 2, (found[2], at)
    screenshot("stalled")
    assert console_errors(browser) == []


def _seconds_of_day(clock: str) -> int:
    hours, minutes, seconds = map(int, clock.split(":"))
    return hours * 3600 + minutes * 60 + seconds
