"""``frontier rescale plan|move``: what must move before a cluster shrinks, and the move.

Both work on data directories, not on a server: ``plan`` only reads process 0's catalogue;
``move`` takes every directory's lock (so the cluster must be stopped) and moves input logs
between them (:mod:`service.store.moving`). ``docs/cluster.md``, "Changing the shape", gives
the steps around them.
"""

from __future__ import annotations

from pathlib import Path

import click

from api.cli.common import json_option, print_json
from service.app import StoreError

_DIRECTORY = click.Path(exists=True, file_okay=False, path_type=Path)


@click.group()
def rescale() -> None:
    """Move inputs between data directories, to change a cluster's shape."""


@rescale.command()
@click.option("--data-dir", type=_DIRECTORY, required=True, help="Process 0's data directory.")
@click.option("--processes", type=int, required=True, help="The processes the cluster will have.")
@click.option("--workers", type=int, help="Its workers per process (where inputs are not).")
@json_option
def plan(data_dir: Path, processes: int, workers: int | None, as_json: bool) -> None:
    """List the inputs held by processes >= --processes: what must move before shrinking.

    One line per input: ``<dataflow> <its name> <input> <process>``; nothing when the
    cluster can shrink as it is (with --json, a list of them). Workers per process change
    nothing here: an input stays on its process, on the worker a hash of its name picks
    there.
    """
    from service.store.moving import to_move

    if processes < 1:
        raise click.BadParameter(f"must be at least 1, not {processes}", param_hint="--processes")
    if workers is not None and workers < 1:
        raise click.BadParameter(f"must be at least 1, not {workers}", param_hint="--workers")
    try:
        held = to_move(data_dir, processes)
    except StoreError as error:
        click.echo(f"frontier: {error}", err=True)
        raise SystemExit(2) from None
    if as_json:
        print_json(
            [
                {"dataflow": i.dataflow, "name": i.name, "input": i.input, "process": i.process}
                for i in held
            ]
        )
    else:
        for item in held:
            click.echo(f"{item.dataflow} {item.name or '-'} {item.input} {item.process}")
    moving = sorted({item.process for item in held})
    summary = (
        f"{len(held)} input(s) to move before the cluster runs on {processes} process(es)"
        + ("" if workers is None else f" x {workers} worker(s)")
        + (f": from process(es) {', '.join(map(str, moving))}" if moving else "")
    )
    click.echo(summary, err=True)


@rescale.command()
@click.option(
    "--from", "source", type=_DIRECTORY, required=True, help="The data directory the inputs leave."
)
@click.option(
    "--to", "target", type=_DIRECTORY, required=True, help="The data directory they go to."
)
@click.option("--to-process", type=int, required=True, help="The process index of --to.")
@click.option(
    "--catalogue",
    "catalogues",
    type=_DIRECTORY,
    multiple=True,
    help="Another data directory whose catalogue must learn where the inputs went "
    "(repeatable: give every other process's; process 0's must be among them all).",
)
def move(source: Path, target: Path, to_process: int, catalogues: tuple[Path, ...]) -> None:
    """Move every input --from's process holds to --to (the cluster stopped).

    Each log is copied frame by frame (each checked), synced, read back and renamed into
    place; then every catalogue given records the new holder (process 0's last); then the
    source's copies go. Interrupted, nothing is lost: run it again to finish. Exit 2, with
    nothing changed, if it cannot be done (a server runs on a directory, a log already at
    --to differs, process 0's catalogue is not given, ...).
    """
    from service.store.moving import move as move_inputs

    try:
        moved = move_inputs(source, target, to_process, list(catalogues))
    except StoreError as error:
        click.echo(f"frontier: {error}", err=True)
        raise SystemExit(2) from None
    for item in moved:
        held = item.held
        how = "copied" if item.copied else "already there"
        click.echo(
            f"moved input {held.input!r} of dataflow {held.dataflow}: process {held.process} -> "
            f"{to_process} ({item.frames} frames, {item.bytes} bytes, {how})"
        )
    click.echo(f"{len(moved)} input(s) moved to {target}", err=True)
