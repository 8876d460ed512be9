"""``frontier check``: what a data directory holds and what is wrong, and ``--repair``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from api.cli.common import json_option, print_json
from service.app import StoreError
from service.store.check import Report, check
from service.store.check import repair as cut_back


def _print(report: Report) -> None:
    click.echo(f"{report.directory}")
    click.echo(f"  catalogue: {report.catalogue}")
    for id, what in report.dataflows.items():
        click.echo(f"    dataflow {id}: {what}")
    for log in report.logs:
        where = log.path.relative_to(report.directory)
        if log.problem is not None:
            click.echo(f"  {where}: DAMAGED")
            continue
        synced = "no sync record" if log.synced is None else f"synced to {log.synced.position}"
        line = (
            f"  {where}: {log.segments} segments, frames {log.first}-"
            f"{log.first + log.frames - 1}, {log.bytes} bytes, {synced}"
        )
        if log.torn_bytes:
            line += f", a torn tail of {log.torn_bytes} bytes (cut at the next start)"
        click.echo(line)
    for problem in report.problems:
        click.echo(f"problem: {problem}", err=True)


def report_json(report: Report) -> dict[str, Any]:
    """The report as ``--json`` prints it: what :func:`_print` says, as data."""
    return {
        "directory": str(report.directory),
        "catalogue": report.catalogue,
        "dataflows": dict(report.dataflows),
        "logs": [
            {
                "path": str(log.path.relative_to(report.directory)),
                "segments": log.segments,
                "first": log.first,
                "frames": log.frames,
                "bytes": log.bytes,
                "synced": None if log.synced is None else log.synced.position,
                "torn_bytes": log.torn_bytes,
                "problem": log.problem,
            }
            for log in report.logs
        ],
        "problems": list(report.problems),
        "healthy": report.healthy,
    }


@click.command(name="check")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--repair",
    is_flag=True,
    help="Cut each damaged log back to its last good frame, saying exactly what is lost.",
)
@json_option
def check_directory(directory: Path, repair: bool, as_json: bool) -> None:
    """Report what a data directory holds and what is wrong with it (exit 1 if anything is).

    Nothing is changed unless --repair is given. Not beside a running server: the directory's
    lock is taken (exit 2 if a server holds it).
    """
    try:
        if repair:
            for line in cut_back(directory):
                click.echo(f"lost: {line}")
        report = check(directory)
    except StoreError as error:
        click.echo(f"frontier: {error}", err=True)
        raise SystemExit(2) from None
    if as_json:
        print_json(report_json(report))
    else:
        _print(report)
    raise SystemExit(0 if report.healthy else 1)
