"""Format 2 frames of commits and checkpoints: a commit's digest and dropped rows, and the
frames written before them (no digest, no count), which still read."""

from __future__ import annotations

import struct

import orjson
import pytest

from service.store import BadOperation, Checkpoint, Commit, CommitState, LoggedAck
from service.store.operations import decode, encode


def frame(header: dict[str, object]) -> bytes:
    """A format 2 payload with ``header`` and no batch bytes."""
    head = orjson.dumps(header)
    return struct.pack("<BI", 2, len(head)) + head


def test_a_commit_keeps_its_digest_and_dropped_rows() -> None:
    commit = Commit(None, ["t1"], "spark.w.b3", 8, ["t0"], "ab" * 32, 17)
    assert decode(encode(commit)) == commit
    bare = Commit("s", ["t1"], "k", None, [])
    assert decode(encode(bare)) == bare
    assert (bare.digest, bare.dropped) == (None, 0)


def test_a_commit_written_before_digests_reads_without_one() -> None:
    header = {"op": "commit", "session": None, "transactions": ["t1"], "key": "k"}
    payload = frame({**header, "advance_to": 4, "discard": []})
    assert decode(payload) == Commit(None, ["t1"], "k", 4, [], None, 0)


def test_a_checkpoint_keeps_each_keys_digest_and_the_dropped_count() -> None:
    ack = LoggedAck(None, None, [5], 2)
    checkpoint = Checkpoint(
        [5],
        commits=[CommitState("with", ("t1",), ack, "cd" * 32), CommitState("without", (), ack)],
        records_in=2,
        dropped_late=40,
    )
    assert decode(encode(checkpoint)) == checkpoint
    header = orjson.loads(encode(checkpoint)[5:])
    assert header["commits"] == [
        ["with", ["t1"], [None, None, [5], 2], "cd" * 32],
        ["without", [], [None, None, [5], 2]],
    ]
    assert header["dropped_late"] == 40


def test_a_checkpoint_written_before_digests_reads_without_them() -> None:
    older = {
        "op": "checkpoint",
        "times": [5],
        "sessions": [],
        "transactions": [],
        "commits": [["k", ["t1"], [None, None, [5], 2]]],
        "expired": [],
        "records_in": 2,
    }
    restored = decode(frame(older))
    assert isinstance(restored, Checkpoint)
    assert restored.commits == [CommitState("k", ("t1",), LoggedAck(None, None, [5], 2))]
    assert restored.dropped_late == 0
    broken = {**older, "commits": [["k", ["t1"], [None, None, [5], 2], "d", "extra"]]}
    with pytest.raises(BadOperation, match="idempotency key 'k' has 5 fields, not 3 or 4"):
        decode(frame(broken))
