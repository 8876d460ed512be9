"""``frontier submit`` and ``frontier push``: graphs and records into a server."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

from api.cli.common import (
    asyncio_run,
    bearer_token,
    dataflow_id,
    json_option,
    load_document,
    print_json,
    server_url,
    token_option,
    url_option,
)
from api.cli.times import TimeShapeError, after, antichain, join, meet, spaced
from api.client import AsyncClient


@click.command()
@click.argument("graph_file")
@click.option(
    "--name",
    help="A name for the dataflow (default: the graph's name, else the file's name without "
    "its extension).",
)
@click.option("--dry-run", is_flag=True, help="Only validate and print the compiled plan.")
@json_option
@url_option
@token_option
def submit(
    graph_file: str,
    name: str | None,
    dry_run: bool,
    as_json: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Submit a graph (YAML or JSON file, or - for standard input).

    Prints the dataflow created (with --json, its whole description); with --dry-run, the
    plan the graph compiles to, as JSON, and creates nothing.
    """
    graph = load_document(graph_file)
    if not isinstance(graph, dict):
        raise click.ClickException(f"{graph_file} is not a graph (a YAML or JSON object)")
    name = dataflow_name(graph_file, graph, name)

    async def go() -> Any:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            if dry_run:
                return await client.plan(graph)
            return await client.create_dataflow(graph, name)

    answer = asyncio_run(go())
    if dry_run or as_json:
        print_json(answer)
        return
    named = f" named {answer['name']}" if answer["name"] else ""
    click.echo(
        f"created dataflow {answer['id']}{named} (inputs: {', '.join(answer['inputs'])}; "
        f"outputs: {', '.join(answer['outputs'])})"
    )


def dataflow_name(graph_file: str, graph: dict[str, Any], name: str | None) -> str | None:
    """The name to submit a graph under: ``--name``, else the graph's, else the file's stem.

    >>> dataflow_name("graphs/counts.yaml", {}, None), dataflow_name("-", {}, None)
    ('counts', None)
    >>> dataflow_name("g.yaml", {"name": "lengths"}, None), dataflow_name("g.yaml", {}, "x")
    ('lengths', 'x')
    """
    if name is not None:
        return name
    if isinstance(graph.get("name"), str) and graph["name"]:
        return str(graph["name"])
    return None if graph_file == "-" else Path(graph_file).stem


@click.command()
@click.argument("dataflow")
@click.argument("input_name")
@click.argument("records_file")
@click.option("--batch", type=click.IntRange(min=1), default=1000, help="Records per request.")
@click.option(
    "--close",
    "close_input",
    is_flag=True,
    help="Close the input at the end (nothing more will arrive: every output completes).",
)
@json_option
@url_option
@token_option
def push(
    dataflow: str,
    input_name: str,
    records_file: str,
    batch: int,
    close_input: bool,
    as_json: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Push a file of JSON lines [time, record] (- for standard input) into an input.

    Opens a session at the least time of the file and pushes the records in batches of
    --batch, in file order. After each batch the session advances to the least time
    still to come, and after the last one past the file's last time (its last coordinate
    plus one), then closes: every time the file holds completes, and the input stays there
    for the next push. With --close the input is closed instead (nothing more will
    arrive). Shows a progress bar on a terminal, then the records pushed and the rate.
    """
    records = read_records(records_file)

    async def go() -> dict[str, Any]:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            id = await dataflow_id(client, dataflow)
            return await push_records(client, id, input_name, records, batch, close_input)

    began = time.monotonic()
    result = asyncio_run(go())
    seconds = time.monotonic() - began
    rate = len(records) / seconds if seconds > 0 else 0.0
    if as_json:
        print_json({**result, "seconds": round(seconds, 6), "records_per_second": round(rate)})
        return
    if records:
        first, last = result["first"], result["last"]
        span = (
            f"time {spaced(first)}" if first == last else f"times {spaced(first)} to {spaced(last)}"
        )
        click.echo(f"pushed {len(records)} records at {span} into {input_name}")
    else:
        click.echo(f"nothing to push into {input_name}")
    click.echo(f"input {input_name}: frontier {antichain(result['frontier'])}")
    click.echo(f"{len(records)} records in {seconds:.2f} s: {rate:.0f} records/s")


def read_records(path: str) -> list[list[Any]]:
    """The ``[time, record]`` lines of a file; a line that is not one names its number."""
    where = "standard input" if path == "-" else path
    try:
        lines = Path(path).read_text().splitlines() if path != "-" else sys.stdin.readlines()
    except OSError as error:
        raise click.ClickException(f"cannot read {where}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise click.ClickException(f"cannot read {where}: it is not UTF-8 text") from None
    records: list[list[Any]] = []
    shape: Any = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            raise click.ClickException(
                f"{where} line {number}: not JSON ({error.msg} at column {error.colno}): "
                "each line is [time, record]"
            ) from None
        if not isinstance(record, list) or len(record) != 2:
            raise click.ClickException(f"{where} line {number}: {_cut(line)} is not [time, record]")
        try:
            shape = meet([record[0]] if shape is None else [shape, record[0]])
        except TimeShapeError as error:
            raise click.ClickException(f"{where} line {number}: {error}") from None
        records.append(record)
    return records


async def push_records(
    client: AsyncClient,
    dataflow: str,
    input_name: str,
    records: list[list[Any]],
    batch: int,
    close_input: bool,
) -> dict[str, Any]:
    """Push ``records`` in batches, advancing past each time once no later record has it.

    The answer: the records pushed, the least and greatest time, and the input's frontier.
    """
    if not records:
        if close_input:
            closed = await client.close_input(dataflow, input_name)
            return {"records": 0, "first": None, "last": None, "frontier": closed}
        frontier = await client.input_frontier(dataflow, input_name)
        return {"records": 0, "first": None, "last": None, "frontier": frontier}
    times = [record[0] for record in records]
    # The least time of each batch and everything after it: where the session may go.
    starts = list(range(0, len(records), batch))
    rest: list[Any] = [None] * len(starts)
    least = times[-1]
    for index in reversed(range(len(starts))):
        least = meet([least, *times[starts[index] : starts[index] + batch]])
        rest[index] = least
    session = await client.session(dataflow, input_name, rest[0])
    with _progress(len(records)) as progress:
        task = progress.add_task(f"pushing into {input_name}", total=len(records), rate="")
        began = time.monotonic()
        for index, start in enumerate(starts):
            if rest[index] != session.time:
                await session.advance(rest[index])
            chunk = records[start : start + batch]
            await session.push(chunk)
            done = start + len(chunk)
            seconds = time.monotonic() - began
            rate = f"{done / seconds:.0f} records/s" if seconds > 0 else ""
            progress.update(task, completed=done, rate=rate)
    last = join(times)
    if close_input:
        frontier = await client.close_input(dataflow, input_name)
    else:
        await session.advance(after(last))
        frontier = (await session.close())["input_frontier"]
    return {"records": len(records), "first": rest[0], "last": last, "frontier": frontier}


def _progress(total: int) -> Any:
    """A progress bar on standard error, shown only on a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        console=console,
        disable=not console.is_terminal,
    )


def _cut(line: str, most: int = 60) -> str:
    line = line.strip()
    return line if len(line) <= most else line[: most - 3] + "..."
