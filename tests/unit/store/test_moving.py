"""Moving input logs between real data directories: checked, never overwriting, resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.store import Catalogue, CorruptLog, DirectoryLocked, Log, Shape
from service.store.lock import DirectoryLock
from service.store.moving import MoveRefused, copy_log, move, to_move

GRAPH = {
    "nodes": {"a": {"op": "input"}, "b": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["a", "out"], ["b", "out"]],
}


def directory(root: Path, process: int, holders: dict[str, int], processes: int = 3) -> Path:
    """A data directory of process ``process`` holding dataflow ``d1`` with ``holders``."""
    path = root / f"data-{process}"
    catalogue = Catalogue(path)
    catalogue.set_shape(Shape(processes, 1), process)
    catalogue.add_dataflow("d1", "t", "flow", GRAPH, 1.0, holders)
    catalogue.close()
    return path


def write_log(path: Path, payloads: list[bytes], segment_bytes: int = 1 << 20) -> None:
    log = Log(path, segment_bytes)
    for payload in payloads:
        log.append([payload])
    log.sync()
    log.close()


def frames(path: Path) -> list[tuple[int, bytes]]:
    log = Log(path, repair=False)
    try:
        return list(log.replay())
    finally:
        log.close()


def holders(path: Path) -> dict[str, int] | None:
    catalogue = Catalogue(path)
    try:
        [dataflow] = catalogue.dataflows()
        return dataflow.holders
    finally:
        catalogue.close()


PAYLOADS = [f"frame {i}".encode() * (i + 1) for i in range(40)]


def test_a_move_copies_every_frame_and_segment_then_forgets_the_source(tmp_path: Path) -> None:
    zero = directory(tmp_path, 0, {"a": 0, "b": 2})
    one = directory(tmp_path, 1, {"a": 0, "b": 2})
    two = directory(tmp_path, 2, {"a": 0, "b": 2})
    source = two / "inputs" / "d1" / "1"
    write_log(source, PAYLOADS, segment_bytes=200)  # several segments
    segments = sorted(p.name for p in source.glob("*.log"))
    assert len(segments) > 3
    (one / "inputs" / "d1" / "1").mkdir(parents=True)  # an empty log, as a start leaves it
    assert [(h.dataflow, h.input, h.process) for h in to_move(zero, 2)] == [("d1", "b", 2)]
    [moved] = move(two, one, 1, [zero])
    assert (moved.held.input, moved.held.process, moved.frames, moved.copied) == ("b", 2, 40, True)
    target = one / "inputs" / "d1" / "1"
    assert frames(target) == list(enumerate(PAYLOADS))
    assert sorted(p.name for p in target.glob("*.log")) == segments
    assert not source.exists()
    assert [holders(d) for d in (zero, one, two)] == [{"a": 0, "b": 1}] * 3
    assert to_move(zero, 2) == []
    # Appending to the moved log goes on where it ended.
    log = Log(target, 200)
    assert log.next_position == 40
    log.close()


def test_a_corrupt_frame_refuses_the_move_changing_nothing(tmp_path: Path) -> None:
    zero = directory(tmp_path, 0, {"a": 1, "b": 0}, processes=2)
    one = directory(tmp_path, 1, {"a": 1, "b": 0}, processes=2)
    source = one / "inputs" / "d1" / "0"
    write_log(source, PAYLOADS[:5])
    [segment] = source.glob("*.log")
    data = bytearray(segment.read_bytes())
    data[20] ^= 0xFF  # inside the first frame's payload
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLog):
        move(one, zero, 0, [])
    assert [holders(d) for d in (zero, one)] == [{"a": 1, "b": 0}] * 2
    assert segment.read_bytes() == bytes(data)
    assert not (zero / "inputs" / "d1" / "0").exists()


def test_a_different_log_at_the_target_is_never_overwritten(tmp_path: Path) -> None:
    zero = directory(tmp_path, 0, {"a": 1, "b": 0}, processes=2)
    one = directory(tmp_path, 1, {"a": 1, "b": 0}, processes=2)
    write_log(one / "inputs" / "d1" / "0", PAYLOADS[:3])
    write_log(zero / "inputs" / "d1" / "0", [b"another history"])
    with pytest.raises(MoveRefused, match="already holds a log of input 'a' of dataflow d1"):
        move(one, zero, 0, [])
    assert frames(zero / "inputs" / "d1" / "0") == [(0, b"another history")]
    assert frames(one / "inputs" / "d1" / "0") == list(enumerate(PAYLOADS[:3]))
    assert holders(zero) == {"a": 1, "b": 0}


def test_an_interrupted_move_is_finished_by_the_same_move_again(tmp_path: Path) -> None:
    zero = directory(tmp_path, 0, {"a": 1, "b": 0}, processes=2)
    one = directory(tmp_path, 1, {"a": 1, "b": 0}, processes=2)
    source = one / "inputs" / "d1" / "0"
    write_log(source, PAYLOADS[:4])
    # Interrupted after the copy was in place, and after process 1's catalogue learnt it.
    copy_log(source, zero / "inputs" / "d1" / "0")
    (zero / "inputs" / "d1" / ".0.moving").mkdir()  # and a half copy of another attempt
    catalogue = Catalogue(one)
    catalogue.set_holders("d1", {"a": 0, "b": 0})
    catalogue.close()
    [moved] = move(one, zero, 0, [])
    assert (moved.frames, moved.copied) == (4, False)
    assert frames(zero / "inputs" / "d1" / "0") == list(enumerate(PAYLOADS[:4]))
    assert not source.exists()
    assert [holders(d) for d in (zero, one)] == [{"a": 0, "b": 0}] * 2


def test_a_move_needs_process_0_s_catalogue_and_stopped_servers(tmp_path: Path) -> None:
    directory(tmp_path, 0, {"a": 2, "b": 0})
    one = directory(tmp_path, 1, {"a": 2, "b": 0})
    two = directory(tmp_path, 2, {"a": 2, "b": 0})
    with pytest.raises(MoveRefused, match="process 0's data directory must be among"):
        move(two, one, 1, [])
    with pytest.raises(MoveRefused, match="is the data directory of process 1, not 0"):
        move(two, one, 0, [tmp_path / "data-0"])
    running = DirectoryLock(one)  # a server runs on it
    try:
        with pytest.raises(DirectoryLocked):
            move(two, one, 1, [tmp_path / "data-0"])
    finally:
        running.release()
    with pytest.raises(MoveRefused, match="is the data directory of process 2: give process 0's"):
        to_move(two, 1)
