"""``frontier submit`` and ``frontier push``: graphs and records into a server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

from api.cli.common import (
    asyncio_run,
    bearer_token,
    fail,
    load_document,
    server_url,
    token_option,
    url_option,
)
from api.client import AsyncClient, FrontierConnectionError, FrontierError


@click.command()
@click.argument("graph_file")
@click.option("--name", help="A name for the dataflow.")
@click.option("--dry-run", is_flag=True, help="Only validate and print the compiled plan.")
@url_option
@token_option
def submit(
    graph_file: str, name: str | None, dry_run: bool, url: str | None, token: str | None
) -> None:
    """Submit a graph (YAML or JSON file, or - for standard input)."""
    graph = load_document(graph_file)

    async def go() -> Any:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            if dry_run:
                return await client.plan(graph)
            return await client.create_dataflow(graph, name)

    try:
        result = asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        fail(error)
    click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


@click.command()
@click.argument("dataflow")
@click.argument("input_name")
@click.argument("records_file")
@click.option("--batch", type=int, default=1000, help="Records per request.")
@click.option("--close", "close_session", is_flag=True, help="Close the session at the end.")
@url_option
@token_option
def push(
    dataflow: str,
    input_name: str,
    records_file: str,
    batch: int,
    close_session: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Push a file of JSON lines ``[time, record]`` into an input, with a progress bar.

    Times must not decrease through the file; the session advances past each time once the
    file moves beyond it.
    """
    from rich.progress import Progress

    lines = (
        Path(records_file).read_text().splitlines()
        if records_file != "-"
        else sys.stdin.read().splitlines()
    )
    records = [orjson.loads(line) for line in lines if line.strip()]

    async def go() -> None:
        async with AsyncClient(server_url(url), bearer_token(token)) as client:
            session = await client.session(dataflow, input_name)
            with Progress() as progress:
                task = progress.add_task("pushing", total=len(records))
                for start in range(0, len(records), batch):
                    chunk = records[start : start + batch]
                    await session.push(chunk)
                    least = chunk[0][0]
                    if (
                        isinstance(least, int)
                        and isinstance(session.time, int)
                        and least > session.time
                    ):
                        await session.advance(least)
                    progress.advance(task, len(chunk))
            if close_session:
                await session.close()

    try:
        asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        fail(error)
