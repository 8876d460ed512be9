"""``frontier watch``, ``tail`` and ``why``: a dataflow's frontiers, outputs and hold-ups."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import orjson

from api.cli.common import asyncio_run, bearer_token, fail, server_url, token_option, url_option
from api.client import AsyncClient, FrontierConnectionError, FrontierError


@click.command()
@click.argument("dataflow")
@click.option("--operators", is_flag=True, help="Every operator's frontier too.")
@url_option
@token_option
def watch(dataflow: str, operators: bool, url: str | None, token: str | None) -> None:
    """Show a dataflow's frontiers live."""
    from rich.live import Live
    from rich.table import Table

    state: dict[str, Any] = {}

    def render() -> Table:
        table = Table(title=f"frontiers of {dataflow}")
        table.add_column("location")
        table.add_column("frontier")
        for location, frontier in state.items():
            table.add_row(location, json.dumps(frontier) if frontier else "[] (complete)")
        return table

    async def plain() -> None:
        # Not a terminal: one flushed line per change, for pipes and scripts.
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            async for event in client.frontiers(dataflow, operators):
                if event.get("type") == "frontier":
                    click.echo(f"{event['location']} {json.dumps(event['frontier'])}")
                elif event.get("type") == "closed":
                    click.echo(f"closed: {event.get('reason')}")
                sys.stdout.flush()

    async def go() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            with Live(render(), refresh_per_second=8) as live:
                async for event in client.frontiers(dataflow, operators):
                    if event.get("type") == "frontier":
                        state[event["location"]] = event["frontier"]
                        live.update(render())
                    elif event.get("type") == "closed":
                        click.echo(f"closed: {event.get('reason')}")

    try:
        asyncio_run(go() if sys.stdout.isatty() else plain())
    except (FrontierError, FrontierConnectionError) as error:
        fail(error)


@click.command()
@click.argument("dataflow")
@click.argument("output")
@click.option("--from", "start", help="Resume from this time (JSON).")
@url_option
@token_option
def tail(dataflow: str, output: str, start: str | None, url: str | None, token: str | None) -> None:
    """Print an output's records as they arrive, one JSON line per batch."""
    begin = None if start is None else orjson.loads(start)

    async def go() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            async for event in client.events(dataflow, output, begin):
                # One line per event, flushed: readers of a pipe see events as they come.
                click.echo(orjson.dumps(event).decode())
                sys.stdout.flush()

    try:
        asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        fail(error)


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
@url_option
@token_option
def why(dataflow: str, location: str, time: str, url: str | None, token: str | None) -> None:
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
            return await client.explain(dataflow, location, parsed)

    try:
        answer = asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        fail(error)
    Console().print(why_tree(answer))
