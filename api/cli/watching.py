"""``frontier watch``, ``tail``, ``stats``, ``why``: frontiers, outputs, pace and hold-ups."""

from __future__ import annotations

import sys
import time as wallclock
from collections.abc import AsyncIterator
from typing import Any

import click
import orjson

from api.cli.common import (
    asyncio_run,
    bearer_token,
    dataflow_id,
    json_option,
    print_json,
    print_line,
    server_url,
    token_option,
    url_option,
)
from api.cli.times import Frontier, antichain
from api.client import AsyncClient, FrontierConnectionError


def location_text(location: str) -> str:
    """A frontier event's location as people read it.

    >>> location_text("input:words"), location_text("operator:count:0")
    ('input words', 'operator count:0')
    """
    kind, _, name = location.partition(":")
    return f"{kind} {name}" if name else location


async def to_the_end(events: AsyncIterator[Any], url: str) -> AsyncIterator[Any]:
    """A subscription's events; :class:`FrontierConnectionError` if it ends unannounced.

    A subscription ends with a ``closed`` event (the dataflow was dropped, the server is
    stopping, ...); a socket that ends without one was cut (the server died, the network).
    """
    async for event in events:
        yield event
        if event.get("type") == "closed":
            return
    raise FrontierConnectionError(f"{url}: the connection was cut before the subscription ended")


@click.command()
@click.argument("dataflow")
@click.option("--operators", is_flag=True, help="Every operator's frontier too.")
@json_option
@url_option
@token_option
def watch(
    dataflow: str, operators: bool, as_json: bool, url: str | None, token: str | None
) -> None:
    """Show a dataflow's frontiers live, until it is dropped.

    On a terminal, a table of every input's and output's frontier; otherwise one line per
    change (``output out: frontier [2]``); with --json, the frontier events as JSON lines.
    """
    from rich.live import Live
    from rich.table import Table

    state: dict[str, Any] = {}

    def render() -> Table:
        table = Table(title=f"frontiers of {dataflow}")
        table.add_column("location")
        table.add_column("frontier")
        for location, frontier in state.items():
            table.add_row(location_text(location), antichain(frontier))
        return table

    async def plain() -> None:
        # Not a terminal: one flushed line per change, for pipes and scripts.
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            id = await dataflow_id(client, dataflow)
            async for event in to_the_end(client.frontiers(id, operators), client.url):
                if as_json:
                    print_line(event)
                elif event.get("type") == "frontier":
                    where = location_text(event["location"])
                    click.echo(f"{where}: frontier {antichain(event['frontier'])}")
                elif event.get("type") == "closed":
                    click.echo(f"closed: {event.get('reason')}")
                sys.stdout.flush()

    async def live() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            with Live(render(), refresh_per_second=8) as shown:
                id = await dataflow_id(client, dataflow)
                events = to_the_end(client.frontiers(id, operators), client.url)
                async for event in events:
                    if event.get("type") == "frontier":
                        state[event["location"]] = event["frontier"]
                        shown.update(render())
                    elif event.get("type") == "closed":
                        click.echo(f"closed: {event.get('reason')}")

    asyncio_run(live() if sys.stdout.isatty() and not as_json else plain())


@click.command()
@click.argument("dataflow")
@click.argument("output")
@click.option("--from", "start", help="Resume from this time (JSON).")
@json_option
@url_option
@token_option
def tail(
    dataflow: str, output: str, start: str | None, as_json: bool, url: str | None, token: str | None
) -> None:
    """Print an output's records and frontier as they come, until the dataflow is dropped.

    One line per record, its time then the record as JSON (``0 {"key": "a"}``), and one
    line each time the frontier moves (``output out: frontier [1]``); with --json, the
    capture events as JSON lines (docs/events.md).
    """
    begin = None if start is None else _time_argument(start, "--from")

    async def go() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            id = await dataflow_id(client, dataflow)
            await client.output(id, output)  # an unknown output is refused here
            frontier = Frontier()
            async for event in to_the_end(client.events(id, output, begin), client.url):
                if as_json:
                    print_line(event)
                    continue
                kind = event.get("type")
                if kind == "messages":
                    time_text = _time_text(event["time"])
                    for record in event["records"]:
                        click.echo(f"{time_text} {_time_text(record)}")
                elif kind == "progress":
                    now = frontier.update(event["changes"])
                    click.echo(f"output {output}: frontier {antichain(now)}")
                elif kind == "closed":
                    click.echo(f"closed: {event.get('reason')}")
                sys.stdout.flush()

    asyncio_run(go())


@click.command()
@click.argument("dataflow")
@click.option(
    "--interval",
    type=click.FloatRange(0.25, 60),
    default=1.0,
    show_default=True,
    help="Seconds between the server's messages.",
)
@json_option
@url_option
@token_option
def stats(
    dataflow: str, interval: float, as_json: bool, url: str | None, token: str | None
) -> None:
    """Print a dataflow's pace each second, until it is dropped.

    One line per second the server sampled: records in and out per second per input and
    output, the completion latency of the times each output completed (mean and longest),
    and the event loop's lag; the minutes the server kept come first. A stall of the
    server's event loop gets a line of its own. With --json, the stats messages as JSON lines
    (docs/api.md, "Stats").
    """

    async def go() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            id = await dataflow_id(client, dataflow)
            told: set[tuple[float, float]] = set()
            async for message in to_the_end(client.stats(id, interval), client.url):
                if as_json:
                    print_line(message)
                elif message.get("type") == "closed":
                    click.echo(f"closed: {message.get('reason')}")
                else:
                    for sample in message["samples"]:
                        click.echo(sample_line(sample))
                    for stall in message["loop"]["stalls"]:
                        key = (stall["at"], stall["seconds"])
                        if key not in told:
                            told.add(key)
                            click.echo(stall_line(stall))
                sys.stdout.flush()

    asyncio_run(go())


def _clock(at: float) -> str:
    return wallclock.strftime("%H:%M:%S", wallclock.localtime(at))


def _seconds(value: float) -> str:
    """A duration as people read it.

    >>> _seconds(0.0123), _seconds(1.5), _seconds(12.25)
    ('12 ms', '1.50 s', '12.2 s')
    """
    if value < 1:
        return f"{round(value * 1000)} ms"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def _per_second(count: int, seconds: float) -> str:
    """Records per second, compact (``950/s``, ``96.2k/s``, ``6.2M/s``).

    >>> _per_second(3, 1.0), _per_second(96_200, 1.0), _per_second(12_400_000, 2.0)
    ('3/s', '96.2k/s', '6.2M/s')
    """
    rate = count / seconds if seconds > 0 else 0.0
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= size * 0.9995:
            scaled = rate / size
            return f"{scaled:.1f}{unit}/s" if scaled < 99.95 else f"{scaled:.0f}{unit}/s"
    return f"{rate:.0f}/s"


def sample_line(sample: dict[str, Any]) -> str:
    """One sample of a dataflow's pace as a line.

    >>> sample_line({"at": 0, "seconds": 1.0, "records_in": {"x": 1200},
    ...     "records_out": {"out": 600}, "latency": {"out": {"completed": 2, "mean": 0.012,
    ...     "max": 0.02}}, "loop_lag": 0.001})[9:]
    'in x 1.2k/s · out out 600/s, latency 12 ms (max 20 ms, 2 times) · loop lag 1 ms'
    """
    seconds = sample["seconds"]
    parts = [f"in {name} {_per_second(n, seconds)}" for name, n in sample["records_in"].items()]
    for name, n in sample["records_out"].items():
        shown = f"out {name} {_per_second(n, seconds)}"
        done = sample["latency"].get(name)
        if done is not None:
            times = "1 time" if done["completed"] == 1 else f"{done['completed']} times"
            shown += f", latency {_seconds(done['mean'])} (max {_seconds(done['max'])}, {times})"
        parts.append(shown)
    parts.append(f"loop lag {_seconds(sample['loop_lag'])}")
    return f"{_clock(sample['at'])} " + " · ".join(parts)


def stall_line(stall: dict[str, Any]) -> str:
    """A stall of the server's event loop as a line."""
    return (
        f"{_clock(stall['at'])} the server's event loop stalled {_seconds(stall['seconds'])}: "
        "it answered nothing meanwhile"
    )


def _time_argument(value: str, flag: str) -> Any:
    """A time given on the command line (JSON: ``3`` or ``[1, 0]``)."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        raise click.BadParameter(
            f"{value!r} is not a time (an integer, or [outer, inner])", param_hint=flag
        ) from None


def _time_text(time: Any) -> str:
    return orjson.dumps(time).decode()


def _holder_label(holder: dict[str, Any]) -> str:
    """One line for a holder: what it is, where, when, how many, and how it gets there."""
    kind = holder["kind"]
    where = holder.get("port") or holder.get("operator") or "?"
    if kind == "records":
        edge = holder.get("edge") or [None, None]
        where = f"on {edge[0] or '?'} -> {edge[1] or '?'}"
        what = f"{holder['count']} records"
    elif kind == "session":
        what = f"session {holder['session']} of {holder['operator']}"
        where = ""
    elif kind == "transaction":
        what = f"transaction {holder['transaction']} ({holder['count']} staged)"
        where = ""
    elif kind == "scope":
        what = f"scope {holder['operator']}"
        where = f"at {holder['port']}" if holder.get("port") else ""
    elif kind == "outside":
        what = f"outside scope {holder['operator']}"
        where = ""
    else:
        what = f"{holder['count']} capabilities" if holder["count"] != 1 else "capability"
        where = f"of {holder['operator']}" + (f" at {holder['port']}" if holder["port"] else "")
    route = " > ".join(holder.get("path") or [])
    parts = [what, where, f"@ {_time_text(holder['time'])}", f"summary {holder['summary']}"]
    if route:
        parts.append(f"via {route}")
    return "  ".join(part for part in parts if part)


def why_tree(answer: dict[str, Any]) -> Any:
    """The explain answer as a rich Tree: each holder, and what is behind it beneath.

    >>> from rich.console import Console
    >>> console = Console(width=100, color_system=None)
    >>> answer = {"location": "out", "time": 1, "complete": True, "frontier": [2], "holders": []}
    >>> console.print(why_tree(answer))
    1 is complete at out (frontier [2])
    """
    from rich.markup import escape
    from rich.tree import Tree

    time = _time_text(answer["time"])
    frontier = _time_text(answer["frontier"])
    if answer["complete"]:
        return Tree(escape(f"{time} is complete at {answer['location']} (frontier {frontier})"))
    tree = Tree(escape(f"{time} is not complete at {answer['location']} (frontier {frontier})"))

    def add(branch: Any, holders: list[dict[str, Any]]) -> None:
        for holder in holders:
            add(branch.add(escape(_holder_label(holder))), holder.get("holders") or [])

    add(tree, answer["holders"])
    return tree


@click.command()
@click.argument("dataflow")
@click.argument("location")
@click.argument("time")
@json_option
@url_option
@token_option
def why(
    dataflow: str, location: str, time: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """Why TIME is not complete at LOCATION: everything holding it back, as a tree.

    LOCATION is an output's name or a node's output port (node:port); TIME is JSON (3, or
    [1,0] for product times).
    """
    from rich.console import Console

    try:
        parsed: Any = orjson.loads(time)
    except orjson.JSONDecodeError:
        parsed = time  # the server says which time domain it expects

    async def go() -> Any:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            return await client.explain(await dataflow_id(client, dataflow), location, parsed)

    answer = asyncio_run(go())
    if as_json:
        print_json(answer)
        return
    Console().print(why_tree(answer))
