"""The API's resources from the command line: dataflows, inputs, sessions and consumers.

``frontier dataflows list|get|drop``, ``frontier input get|advance|close``, ``frontier
sessions list|open|close`` and ``frontier consumers list|commit|drop``: each one request (or
two) of ``docs/api.md``, printed for people, or with ``--json`` as the server answered.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import click

from api.cli.common import (
    asyncio_run,
    bearer_token,
    dataflow_id,
    json_option,
    print_json,
    server_url,
    token_option,
    url_option,
)
from api.cli.times import antichain, spaced
from api.client import AsyncClient


def call(url: str | None, token: str | None, work: Callable[[AsyncClient], Awaitable[Any]]) -> Any:
    """Run ``work`` with a client of ``--url`` and ``--token``; its answer."""

    async def go() -> Any:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            return await work(client)

    return asyncio_run(go())


def call_on(
    url: str | None,
    token: str | None,
    dataflow: str,
    work: Callable[[AsyncClient, str], Awaitable[Any]],
) -> Any:
    """Run ``work`` with a client and the id of ``dataflow`` (an id, or a name); its answer."""

    async def with_id(client: AsyncClient) -> Any:
        return await work(client, await dataflow_id(client, dataflow))

    return call(url, token, with_id)


def time_argument(value: str, what: str = "TIME") -> Any:
    """A time given on the command line as JSON (``3``, ``[1, 0]``); refused naming ``what``.

    >>> time_argument("[1, 0]")
    [1, 0]
    """
    import orjson

    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        raise click.BadParameter(
            f"{value!r} is not a time (an integer, or [outer, inner] as JSON)", param_hint=what
        ) from None


def show_list(
    items: list[Any], as_json: bool, empty: str, header: list[str], rows: list[list[str]]
) -> None:
    """``items`` as JSON, or a line saying there are none, or a table of ``rows``."""
    if as_json:
        print_json(items)
    elif not items:
        click.echo(empty)
    else:
        for line in table([header, *rows]):
            click.echo(line)


def table(rows: list[list[str]]) -> list[str]:
    """Rows as lines of left-aligned columns, two spaces apart (the first row a header).

    >>> table([["ID", "NAME"], ["ab", "x"]])
    ['ID  NAME', 'ab  x']
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def when(seconds: float) -> str:
    """Seconds since the epoch as an ISO UTC time, to the second.

    >>> when(1767225600.5)
    '2026-01-01T00:00:00Z'
    """
    moment = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- dataflows


@click.group()
def dataflows() -> None:
    """List, describe and drop dataflows."""


@dataflows.command("list")
@click.option("--name", help="Only the dataflows of this name (exactly).")
@json_option
@url_option
@token_option
def list_dataflows(name: str | None, as_json: bool, url: str | None, token: str | None) -> None:
    """The dataflows (of this tenant), oldest first: id, name, status, inputs, outputs."""
    items = call(url, token, lambda client: client.dataflows(name=name))
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no dataflows" + (f" named {name}" if name is not None else ""))
        return
    rows = [["ID", "NAME", "STATUS", "CREATED", "INPUTS", "OUTPUTS"]]
    rows += [
        [
            item["id"],
            item["name"] or "-",
            item["status"],
            when(item["created_at"]),
            ",".join(item["inputs"]) or "-",
            ",".join(item["outputs"]) or "-",
        ]
        for item in items
    ]
    for line in table(rows):
        click.echo(line)


@dataflows.command("get")
@click.argument("dataflow")
@click.option("--operators", is_flag=True, help="Every operator's frontiers and counts too.")
@json_option
@url_option
@token_option
def get_dataflow(
    dataflow: str, operators: bool, as_json: bool, url: str | None, token: str | None
) -> None:
    """A dataflow: its status, and each input's and output's frontier and counts.

    With --json, the whole description (its graph too).
    """
    described = call_on(url, token, dataflow, lambda client, id: client.dataflow(id, operators))
    if as_json:
        print_json(described)
        return
    named = f" named {described['name']}" if described["name"] else ""
    click.echo(
        f"dataflow {described['id']}{named}: {described['status']}, created "
        f"{when(described['created_at'])}"
    )
    if described.get("error"):
        click.echo(f"  error: {described['error']}")
    for name, state in described["inputs"].items():
        sessions = len(state["sessions"]) if isinstance(state["sessions"], list) else 0
        click.echo(
            f"  input {name}: frontier {antichain(state['frontier'])}, "
            f"{state['records_in']} records in, {sessions} sessions open"
        )
    for name, state in described["outputs"].items():
        click.echo(
            f"  output {name}: frontier {antichain(state['frontier'])}, "
            f"{state['records_out']} records out"
        )
    for node, state in (described.get("operators") or {}).items():
        frontiers = ", ".join(antichain(port["frontier"]) for port in state.get("outputs", []))
        click.echo(f"  operator {node}: frontier {frontiers or '-'}")


async def drop(client: AsyncClient, id: str) -> str:
    """Drop the dataflow ``id``; its id."""
    await client.drop(id)
    return id


@dataflows.command("drop")
@click.argument("dataflow")
@url_option
@token_option
def drop_dataflow(dataflow: str, url: str | None, token: str | None) -> None:
    """Drop a dataflow: it stops everywhere, its subscribers get a final event."""
    dropped = call_on(url, token, dataflow, drop)
    click.echo(f"dropped dataflow {dropped}")


# --------------------------------------------------------------------------- inputs


@click.group("input")
def input_group() -> None:
    """Describe, advance and close an input."""


@input_group.command("get")
@click.argument("dataflow")
@click.argument("input_name")
@json_option
@url_option
@token_option
def get_input(
    dataflow: str, input_name: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """An input: its frontier, records taken in, open sessions and transactions."""
    described = call_on(url, token, dataflow, lambda client, id: client.input(id, input_name))
    if as_json:
        print_json(described)
        return
    state = "closed" if described["closed"] else f"at {spaced(described['time'])}"
    click.echo(
        f"input {input_name}: frontier {antichain(described['frontier'])} ({state}), "
        f"{described['records_in']} records in, {len(described['sessions'])} sessions open, "
        f"{len(described['transactions'])} transactions open ({described['staged']} staged)"
    )


@input_group.command("advance")
@click.argument("dataflow")
@click.argument("input_name")
@click.argument("time")
@json_option
@url_option
@token_option
def advance_input(
    dataflow: str, input_name: str, time: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """Advance an input to TIME (JSON: 5, or [1, 0]): the times before it complete.

    Needs no session; open sessions still hold the input at their own times (frontier
    sessions list shows them).
    """
    to = time_argument(time)
    ack = call_on(url, token, dataflow, lambda client, id: client.advance_input(id, input_name, to))
    if as_json:
        print_json(ack)
        return
    click.echo(f"input {input_name}: frontier {antichain(ack['input_frontier'])}")


@input_group.command("close")
@click.argument("dataflow")
@click.argument("input_name")
@json_option
@url_option
@token_option
def close_input(
    dataflow: str, input_name: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """Close an input: every session ends, nothing more will arrive, its outputs complete."""
    frontier = call_on(url, token, dataflow, lambda client, id: client.close_input(id, input_name))
    if as_json:
        print_json({"input_frontier": frontier})
        return
    click.echo(f"input {input_name}: frontier {antichain(frontier)}")


# --------------------------------------------------------------------------- sessions


@click.group()
def sessions() -> None:
    """List, open and close an input's producer sessions."""


@sessions.command("list")
@click.argument("dataflow")
@click.argument("input_name")
@json_option
@url_option
@token_option
def list_sessions(
    dataflow: str, input_name: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """An input's open sessions, each with the time it holds the input at."""
    described = call_on(url, token, dataflow, lambda client, id: client.input(id, input_name))
    rows = [[s["session"], spaced(s["time"])] for s in described["sessions"]]
    show_list(
        described["sessions"],
        as_json,
        f"no sessions open on input {input_name}",
        ["SESSION", "TIME"],
        rows,
    )


@sessions.command("open")
@click.argument("dataflow")
@click.argument("input_name")
@click.option("--start", help="The session's time (JSON; default the input's time).")
@json_option
@url_option
@token_option
def open_session(
    dataflow: str,
    input_name: str,
    start: str | None,
    as_json: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Open a producer session: it holds the input at its time until it advances or closes."""
    at = None if start is None else time_argument(start, "--start")

    async def work(client: AsyncClient, id: str) -> Any:
        session = await client.session(id, input_name, at)
        return {"session": session.id, "time": session.time}

    opened = call_on(url, token, dataflow, work)
    if as_json:
        print_json(opened)
        return
    click.echo(f"session {opened['session']} at {spaced(opened['time'])}")


@sessions.command("close")
@click.argument("dataflow")
@click.argument("input_name")
@click.argument("session")
@json_option
@url_option
@token_option
def close_session(
    dataflow: str,
    input_name: str,
    session: str,
    as_json: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Close a session: it no longer holds the input back."""
    ack = call_on(
        url, token, dataflow, lambda client, id: client.close_session(id, input_name, session)
    )
    if as_json:
        print_json(ack)
        return
    click.echo(
        f"closed session {session}; input {input_name}: frontier {antichain(ack['input_frontier'])}"
    )


# --------------------------------------------------------------------------- consumers


@click.group()
def consumers() -> None:
    """List, commit and drop an output's registered consumers (readers)."""


@consumers.command("list")
@click.argument("dataflow")
@click.argument("output")
@json_option
@url_option
@token_option
def list_consumers(
    dataflow: str, output: str, as_json: bool, url: str | None, token: str | None
) -> None:
    """An output's registered consumers, each with the time it has read up to."""
    described = call_on(url, token, dataflow, lambda client, id: client.output(id, output))
    rows = [
        [c["consumer"], "-" if c["committed"] is None else spaced(c["committed"])]
        for c in described["consumers"]
    ]
    show_list(
        described["consumers"],
        as_json,
        f"no consumers of output {output}",
        ["CONSUMER", "COMMITTED"],
        rows,
    )


@consumers.command("commit")
@click.argument("dataflow")
@click.argument("output")
@click.argument("consumer")
@click.argument("time")
@json_option
@url_option
@token_option
def commit_consumer(
    dataflow: str,
    output: str,
    consumer: str,
    time: str,
    as_json: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Register CONSUMER as having read every time of OUTPUT before TIME (JSON, or null).

    The output keeps its completed times until every consumer has committed past them.
    """
    committed = time_argument(time)
    state = call_on(
        url,
        token,
        dataflow,
        lambda client, id: client.commit_consumer(id, output, consumer, committed),
    )
    if as_json:
        print_json(state)
        return
    read = "-" if state["committed"] is None else spaced(state["committed"])
    click.echo(
        f"consumer {consumer} committed {read}; output {output}: frontier "
        f"{antichain(state['frontier'])}"
    )


@consumers.command("drop")
@click.argument("dataflow")
@click.argument("output")
@click.argument("consumer")
@url_option
@token_option
def drop_consumer(
    dataflow: str, output: str, consumer: str, url: str | None, token: str | None
) -> None:
    """Unregister a consumer: the output no longer keeps times for it."""
    call_on(url, token, dataflow, lambda client, id: client.forget_consumer(id, output, consumer))
    click.echo(f"dropped consumer {consumer} of output {output}")
