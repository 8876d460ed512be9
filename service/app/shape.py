"""The shape a data directory was written by, checked at every start (and changed on purpose).

A directory's catalogue records the cluster's shape (processes, workers per process) and the
directory's process index, and, per dataflow, which process holds each input. A start:

* on a directory without a shape (new, or written before shapes were kept) records this
  one; holders missing from an older directory are filled in by the rule it was written
  with (:func:`~service.app.placement.legacy_holders`) at this shape, so they stay put;
* on another process's directory is refused;
* with another shape is refused unless it says ``rescale`` (``--rescale``,
  ``FRONTIER_RESCALE=1``, ``rescale: true``); with it, the dataflows are rebuilt on the new
  shape, every input kept on its process;
* is refused, at process 0 (whose catalogue decides where inputs live), when an input is
  held by a process the shape no longer has (it must be moved first: ``frontier rescale
  move``); at any process, when this directory holds the log of an input
  another process holds (a move left it behind, or the directory was written under another
  placement): either way acknowledged records would silently be out of view.

Every refusal is a :class:`ShapeRefused`, one line, naming what to do
(``docs/cluster.md``, "Changing the shape").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from service.app.journal import StoreJournal
from service.app.placement import legacy_holders
from service.app.settings import Settings
from service.store import Shape, StoredDataflow, StoreError

GUIDE = 'docs/cluster.md, "Changing the shape"'


class ShapeRefused(StoreError):
    """The directory was written by another shape or process: this start must not run."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What the start found: the dataflows (their holders filled in), and whether it rescales."""

    dataflows: list[StoredDataflow]
    rescaled: bool
    """The directory was written by another shape: this start changes it."""
    before: Shape | None = None
    """The shape it was written by (``None``: none was recorded)."""


def settle(
    journal: StoreJournal,
    settings: Settings,
    stored: list[StoredDataflow],
    inputs_of: Callable[[StoredDataflow], list[str]],
) -> Settled:
    """Check the directory's shape against this start's; record this one if it may run.

    ``inputs_of`` gives a stored dataflow's inputs, in its graph's order.
    :class:`ShapeRefused` if the start must not run (nothing is recorded then).
    """
    shape = Shape(settings.processes, settings.workers)
    process = settings.process
    directory = settings.data_dir
    found = journal.shape()
    before = None if found is None else found[0]
    if found is not None:
        written, written_process = found
        if written_process != process:
            raise ShapeRefused(
                f"data directory {directory} holds the data of process {written_process} of "
                f"a cluster of {written}; this start is process {process}: give each process "
                f"its own directory ({GUIDE})"
            )
        if written != shape and not settings.rescale:
            raise ShapeRefused(
                f"data directory {directory} was written by a cluster of {written}; this "
                f"start is {shape}: start every process with --rescale to change the shape "
                f"({GUIDE})"
            )
    settled = []
    for dataflow in stored:
        holders = dataflow.holders
        if holders is None:
            holders = legacy_holders(inputs_of(dataflow), shape.processes, shape.workers)
            dataflow = dataclasses.replace(dataflow, holders=holders)
        settled.append(dataflow)
    _check_holders(settled, shape, process, journal.held_logs(), inputs_of, str(directory))
    for dataflow, kept in zip(settled, stored, strict=True):
        if kept.holders is None and dataflow.holders is not None:
            journal.set_holders(dataflow.id, dataflow.holders)
    if found != (shape, process):
        journal.set_shape(shape, process)
    return Settled(settled, found is not None and found[0] != shape, before)


def _check_holders(
    dataflows: list[StoredDataflow],
    shape: Shape,
    process: int,
    held: set[tuple[str, int]],
    inputs_of: Callable[[StoredDataflow], list[str]],
    directory: str,
) -> None:
    """Refuse inputs held by a process the shape lacks, and logs left at a non-holder."""
    for dataflow in dataflows:
        if dataflow.status == "failed":
            continue  # never built again: where its inputs were does not matter
        holders = dataflow.holders or {}
        for name, holder in holders.items():
            # Process 0's catalogue decides (another one not told of a move may be stale,
            # and takes process 0's holders from its creates).
            if process == 0 and holder >= shape.processes:
                raise ShapeRefused(
                    f"input {name!r} of dataflow {dataflow.id} ({dataflow.name or 'unnamed'}) "
                    f"is held by process {holder}, which a cluster of {shape} does not have: "
                    f"move it first, the cluster stopped, with `frontier rescale move --from "
                    f"<process {holder}'s data directory> --to <a kept process's data "
                    f"directory> --to-process <its index> --catalogue <every other data "
                    f"directory>` ({GUIDE})"
                )
        for index, name in enumerate(inputs_of(dataflow)):
            holder = holders.get(name, 0)
            if (dataflow.id, index) in held and holder != process:
                raise ShapeRefused(
                    f"data directory {directory} holds the log of input {name!r} of dataflow "
                    f"{dataflow.id}, but process {holder} holds that input, not this one "
                    f"({process}): finish moving it with `frontier rescale move --from "
                    f"{directory} --to <process {holder}'s data directory> --to-process "
                    f"{holder} ...`, or start this directory as the process that wrote it "
                    f"({GUIDE})"
                )
