"""End to end: expressions have a budget, and the server answers /healthz while they run.

Issue 16: ``matches`` ran Python's backtracking ``re``, and ``"^(a+)+$"`` on ``"a" * 27 + "b"``
held the event loop (every tenant, ``/healthz`` too) for 5-6 s, doubling per character; a
comprehension nested in another over a 32,000-element record held it 13 s. Against a real
server (the module's ``service``: a subprocess, two workers), while a probe asks ``/healthz``
throughout and each answer must come within ``PROBE_BOUND`` seconds:

* the regex case is RE2's, linear: 41 characters (days with ``re``) and 100,000 answer at once;
  a pattern read from a record that does not compile fails that record only;
* the nested case is refused at submission (422), with the estimate and the limit;
* what the estimate cannot see coming (a list the graph made, every element sharing one long
  list; a long string copied per element) fails on the step limit: that record is dropped and
  counted (or fails the dataflow, with ``on_error: fail``), the others pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from api.client import AsyncClient, FrontierError
from tests.e2e.conftest import Server

PROBE_BOUND = 2.0
"""The longest one /healthz may take while a hostile record is evaluated (seconds): generous,
for a shared machine; before the budget, the regex case alone held it for days."""
DEADLINE = 60.0
"""The longest a dataflow may take to complete its records (seconds)."""
STEP_LIMIT = "step limit exceeded: the record needs more than 10,000,000 steps"


def graph(*operators: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """input ``in`` -> each operator in turn -> output ``out``."""
    names = ["in", *(name for name, _ in operators), "out"]
    nodes = {"in": {"op": "input"}, **dict(operators), "out": {"op": "output"}}
    return {"nodes": nodes, "edges": [[a, b] for a, b in itertools.pairwise(names)]}


@contextlib.asynccontextmanager
async def healthz_probe(server: Server) -> AsyncIterator[list[float]]:
    """Ask /healthz again and again for the ``async with`` block; the seconds each answer took."""
    answers: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        timeout = aiohttp.ClientTimeout(total=DEADLINE)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while not done.is_set():
                start = time.monotonic()
                async with http.get(server.url + "/healthz") as response:
                    assert (response.status, await response.json()) == (200, {"status": "ok"})
                answers.append(time.monotonic() - start)
                with contextlib.suppress(TimeoutError):  # a short polling step
                    await asyncio.wait_for(done.wait(), 0.02)

    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(probe())
        try:
            yield answers
        finally:
            done.set()


async def run(
    server: Server,
    spec: dict[str, Any],
    records: list[Any],
    status: str = "completed",
    bound: float = PROBE_BOUND,
) -> tuple[list[Any], Any]:
    """Feed ``records`` at time 0 (and close the input), probing /healthz until ``status``.

    Returns the output's records at time 0 (sorted) and the dataflow as described then.
    """
    async with AsyncClient(server.url) as client, healthz_probe(server) as answers:
        dataflow = (await client.create_dataflow(spec))["id"]
        session = await client.session(dataflow, "in")
        await session.push([[0, record] for record in records])
        if status == "completed":  # a failing dataflow fails on the records alone
            await client.close_input(dataflow, "in")
        deadline = time.monotonic() + DEADLINE
        while (described := await client.dataflow(dataflow, operators=False))["status"] != status:
            assert time.monotonic() < deadline, f"not {status} in {DEADLINE}s: {described}"
            await asyncio.sleep(0.02)
        read = [] if status != "completed" else [r async for _, r in client.times(dataflow, "out")]
    assert answers, "the probe got no answer"
    assert max(answers) < bound, f"/healthz took {max(answers):.2f}s"
    outputs = sorted((r for rs in read for r in rs), key=orjson.dumps)
    return outputs, described


# --------------------------------------------------------------------------- regular expressions


async def test_a_catastrophic_pattern_for_re_is_linear_with_re2(service: Server) -> None:
    hostile = ["a" * 40 + "b", "a" * 100_000 + "b"]  # each takes re 2**40 steps or more
    spec = graph(("f", {"op": "filter", "expr": 'r.matches("^(a+)+$")'}))
    outputs, described = await run(service, spec, [*hostile, "aaaa", "b"])
    assert outputs == ["aaaa"]
    assert described["record_errors"] == {}

    spec = graph(("m", {"op": "map", "expr": '[r.size(), r.matches("^(a+)+$")]'}))
    outputs, described = await run(service, spec, [*hostile, "aaaa", "b"])
    expected = [[1, False], [4, True], [41, False], [100_001, False]]
    assert outputs == sorted(expected, key=orjson.dumps)
    assert described["record_errors"] == {}


async def test_a_pattern_from_a_record_that_does_not_compile_fails_that_record(
    service: Server,
) -> None:
    spec = graph(("f", {"op": "filter", "expr": "r.s.matches(r.p)"}))
    records = [
        {"s": "aaa", "p": "^a+$"},
        {"s": "abab", "p": "(ab)\\1"},  # a backreference: not RE2
        {"s": "a" * 40 + "b", "p": "^(a+)+$"},
    ]
    outputs, described = await run(service, spec, records)
    assert outputs == [{"s": "aaa", "p": "^a+$"}]
    last = "invalid regular expression: invalid escape sequence: \\1"
    assert described["record_errors"] == {"f": {"count": 1, "last": last}}


async def test_a_literal_pattern_re2_does_not_take_is_refused_at_submission(
    service: Server,
) -> None:
    spec = graph(("f", {"op": "filter", "expr": 'r.matches("(?=a)b")'}))
    async with AsyncClient(service.url) as client:
        with pytest.raises(FrontierError) as refused:
            await client.create_dataflow(spec)
    assert refused.value.status == 422
    assert refused.value.problem["problems"] == [
        {
            "pointer": "/nodes/f/expr",
            "detail": "expression does not compile: line 1, column 11: invalid regular "
            "expression: invalid perl operator: (?=",
        }
    ]


# --------------------------------------------------------------------------- cost and steps


async def test_nested_comprehensions_over_a_records_lists_are_refused(service: Server) -> None:
    spec = graph(("f", {"op": "filter", "expr": "r.exists(x, r.exists(y, x == y))"}))
    body = orjson.dumps({"graph": spec})
    async with (
        aiohttp.ClientSession() as http,
        http.post(service.url + "/v1/dataflows", data=body) as response,
    ):
        assert (response.status, response.content_type) == (422, "application/problem+json")
        problem = await response.json(content_type=None)
    assert problem == {
        "type": "https://frontier.dev/problems/invalid",
        "title": "Unprocessable content",
        "status": 422,
        "detail": "the graph has 1 problem(s)",
        "problems": [
            {
                "pointer": "/nodes/f/expr",
                "detail": "expression does not compile: line 1, column 3: expression too costly:"
                " its estimated cost on a record of 1,048,576 bytes is 1,374,391,107,586, over"
                " the limit of 100,000,000 (this comprehension's range times its body's cost)",
            }
        ],
    }


SHARED = graph(
    ("m", {"op": "map", "expr": "r.xs.map(x, r.xs)"}),  # n references to one list of n
    ("f", {"op": "filter", "expr": "r.exists(l, l.exists(y, y == -1))"}),
)
"""Each of ``f``'s ranges is part of its element, so its estimate is linear in its record;
but ``m`` made every element the same list: evaluated, it is n x n."""


async def test_a_list_the_graph_made_fails_on_the_step_limit(service: Server) -> None:
    records = [{"xs": [1, 2, -1]}, {"xs": list(range(20_000))}, {"xs": [1, 2]}]
    outputs, described = await run(service, SHARED, records)
    assert outputs == [[[1, 2, -1], [1, 2, -1], [1, 2, -1]]]
    assert described["record_errors"] == {"f": {"count": 1, "last": STEP_LIMIT}}


async def test_with_on_error_fail_the_step_limit_fails_the_dataflow(service: Server) -> None:
    spec = SHARED | {"nodes": SHARED["nodes"] | {"f": SHARED["nodes"]["f"] | {"on_error": "fail"}}}
    records = [{"xs": [1, 2, -1]}, {"xs": list(range(20_000))}]
    _, described = await run(service, spec, records, status="failed")
    assert described["error"] == f"EvaluationError: node 'f': {STEP_LIMIT}"


async def test_a_string_copied_per_element_fails_on_the_step_limit(service: Server) -> None:
    spec = graph(("n", {"op": "flat_map", "expr": "r.tags.map(t, r.id + ':' + t)"}))
    hostile = {"id": "x" * 100_000, "tags": ["a"] * 1_000}  # 100 MB of copies from 104 kB
    outputs, described = await run(service, spec, [{"id": "k", "tags": ["a", "b"]}, hostile])
    assert outputs == ["k:a", "k:b"]
    assert described["record_errors"] == {"n": {"count": 1, "last": STEP_LIMIT}}


async def test_a_batch_of_many_costly_records_lets_the_server_answer_between_them(
    service: Server,
) -> None:
    # Each record is within the step limit (1,000 x 1,000 steps, tens of ms), but 100 of
    # them in one batch are seconds of work: the operator evaluates them in slices and lets
    # the event loop run between its runs, so /healthz answers well within a second.
    records = [{"xs": list(range(1_000))} for _ in range(100)] + [{"xs": [1, 2, -1]}]
    outputs, described = await run(service, SHARED, records, bound=1.0)
    assert outputs == [[[1, 2, -1], [1, 2, -1], [1, 2, -1]]]
    assert described["record_errors"] == {}
