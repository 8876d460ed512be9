"""Where inputs live and the shape a data directory was written by (real files, no server).

The placement rule (fewest inputs first, lowest index among equals), the rule directories
written before holders were kept are read by, and every refusal of :func:`settle`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators.runtime import stable_hash
from service.app.journal import StoreJournal
from service.app.placement import legacy_holders, place_inputs
from service.app.settings import Cluster, Settings
from service.app.shape import ShapeRefused, settle
from service.store import Catalogue, Log, Shape, StoredDataflow

GRAPH = {
    "nodes": {"a": {"op": "input"}, "b": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["a", "out"], ["b", "out"]],
}


def test_each_input_goes_to_the_process_holding_the_fewest() -> None:
    assert place_inputs(["a", "b", "c", "d"], [2, 0, 1]) == {"a": 1, "b": 1, "c": 2, "d": 0}
    assert place_inputs(["a", "b"], [0, 0, 0]) == {"a": 0, "b": 1}
    assert place_inputs([], [0, 0]) == {}
    # A process a rescale added (holding none) takes the next inputs.
    assert place_inputs(["x", "y", "z"], [3, 3, 0]) == {"x": 2, "y": 2, "z": 2}


@pytest.mark.parametrize(("processes", "workers"), [(1, 1), (1, 3), (2, 2), (3, 1), (4, 3)])
def test_the_legacy_rule_is_the_worker_the_old_hash_picked(processes: int, workers: int) -> None:
    names = ["words", "lines", "x", "y", "in", "rows", "events"]
    holders = legacy_holders(names, processes, workers)
    for name in names:
        old = stable_hash(name) % (processes * workers)  # the worker of all, as it was
        assert holders[name] * workers + stable_hash(name) % workers == old


def settings(
    directory: Path, processes: int, workers: int, process: int = 0, **more: bool
) -> Settings:
    cluster = None
    if processes > 1:
        peers = tuple(("127.0.0.1", 7000 + i) for i in range(processes))
        apis = tuple(f"127.0.0.1:{8000 + i}" for i in range(processes))
        cluster = Cluster(processes, process, peers, apis, b"s")
    return Settings(workers=workers, data_dir=str(directory), cluster=cluster, **more)


def inputs_of(dataflow: StoredDataflow) -> list[str]:
    return [name for name, node in dataflow.graph["nodes"].items() if node["op"] == "input"]


def start(directory: Path, processes: int, workers: int, process: int = 0, **more: bool) -> Any:
    """Open the directory as a start would and settle its shape; close it again."""
    journal = StoreJournal(settings(directory, processes, workers, process, **more), print)
    try:
        stored = journal.open()
        return settle(journal, journal._settings, stored, inputs_of)
    finally:
        journal.store.catalogue.close()
        journal.store.lock.release()


def test_a_first_start_records_its_shape_and_a_later_one_must_match(tmp_path: Path) -> None:
    settled = start(tmp_path, 1, 1)
    assert (settled.dataflows, settled.rescaled, settled.before) == ([], False, None)
    assert Catalogue(tmp_path).shape() == (Shape(1, 1), 0)
    assert start(tmp_path, 1, 1).rescaled is False
    with pytest.raises(ShapeRefused) as refused:
        start(tmp_path, 3, 1)
    assert str(refused.value) == (
        f"data directory {tmp_path} was written by a cluster of 1 process x 1 worker; this "
        "start is 3 processes x 1 worker: start every process with --rescale to change the "
        'shape (docs/cluster.md, "Changing the shape")'
    )
    assert Catalogue(tmp_path).shape() == (Shape(1, 1), 0)  # a refusal records nothing
    settled = start(tmp_path, 3, 1, rescale=True)
    assert (settled.rescaled, settled.before) == (True, Shape(1, 1))
    assert Catalogue(tmp_path).shape() == (Shape(3, 1), 0)
    with pytest.raises(ShapeRefused, match="this start is 1 process x 2 workers: start every"):
        start(tmp_path, 1, 2)


def test_another_process_s_directory_is_refused(tmp_path: Path) -> None:
    start(tmp_path, 2, 1, process=1)
    with pytest.raises(ShapeRefused) as refused:
        start(tmp_path, 2, 1, process=0, rescale=True)
    assert str(refused.value) == (
        f"data directory {tmp_path} holds the data of process 1 of a cluster of 2 processes "
        "x 1 worker; this start is process 0: give each process its own directory "
        '(docs/cluster.md, "Changing the shape")'
    )


def test_an_older_directory_s_holders_are_filled_in_by_the_old_rule(tmp_path: Path) -> None:
    catalogue = Catalogue(tmp_path)
    catalogue.add_dataflow("old", "t", "kept", GRAPH, 1.0)
    catalogue.add_dataflow("new", "t", "", GRAPH, 2.0, {"a": 1, "b": 0})
    catalogue.close()
    [old, new] = start(tmp_path, 2, 2, process=0).dataflows
    expected = legacy_holders(["a", "b"], 2, 2)
    assert (old.holders, new.holders) == (expected, {"a": 1, "b": 0})
    assert [d.holders for d in Catalogue(tmp_path).dataflows()] == [expected, {"a": 1, "b": 0}]


def test_a_shrink_that_drops_a_held_input_is_refused_naming_it(tmp_path: Path) -> None:
    start(tmp_path, 3, 1)
    catalogue = Catalogue(tmp_path)
    catalogue.add_dataflow("d1", "t", "counts", GRAPH, 1.0, {"a": 0, "b": 2})
    catalogue.close()
    with pytest.raises(ShapeRefused) as refused:
        start(tmp_path, 2, 1, rescale=True)
    assert str(refused.value).startswith(
        "input 'b' of dataflow d1 (counts) is held by process 2, which a cluster of "
        "2 processes x 1 worker does not have: move it first, the cluster stopped, with "
        "`frontier rescale move --from <process 2's data directory> --to "
    )
    assert Catalogue(tmp_path).shape() == (Shape(3, 1), 0)


def test_a_log_left_at_a_process_that_does_not_hold_its_input_is_refused(tmp_path: Path) -> None:
    start(tmp_path, 2, 1)
    catalogue = Catalogue(tmp_path)
    catalogue.add_dataflow("d1", "t", "", GRAPH, 1.0, {"a": 0, "b": 1})
    catalogue.close()
    log = tmp_path / "inputs" / "d1" / "1"
    log.mkdir(parents=True)
    written = Log(log)
    written.append([b"a frame"])
    written.sync()
    written.close()
    with pytest.raises(ShapeRefused) as refused:
        start(tmp_path, 2, 1)
    assert str(refused.value).startswith(
        f"data directory {tmp_path} holds the log of input 'b' of dataflow d1, but process 1 "
        "holds that input, not this one (0): finish moving it with `frontier rescale move "
    )


def test_another_process_defers_to_process_0_s_holders(tmp_path: Path) -> None:
    """A catalogue a move did not tell still names the old holder: process 0's creates
    correct it, so only process 0 refuses an input held by a process the shape lacks."""
    start(tmp_path, 3, 1, process=1)
    catalogue = Catalogue(tmp_path)
    catalogue.add_dataflow("d1", "t", "", GRAPH, 1.0, {"a": 0, "b": 2})
    catalogue.close()
    settled = start(tmp_path, 2, 1, process=1, rescale=True)
    assert [d.holders for d in settled.dataflows] == [{"a": 0, "b": 2}]
    assert Catalogue(tmp_path).shape() == (Shape(2, 1), 1)
