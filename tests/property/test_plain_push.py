"""``plain_push`` (the bulk-checked fast path) agrees with the models on every body.

Whatever it accepts, the models accept with the same sequence number, times and records;
whatever the models accept with integer times, it accepts too (so the slow path only sees
product times and bodies to refuse).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from api.models import SEQ_MAX, ClientFrame, PlainPush, Push, PushFrame, plain_push
from operators.progress import MAX_TIME

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=5,
)
times = st.one_of(
    st.integers(0, MAX_TIME),
    st.sampled_from([-1, MAX_TIME + 1, True, 1.0, "3", None]),
    st.lists(st.integers(0, 9), min_size=2, max_size=2),
)
valid_pair = st.tuples(st.integers(0, MAX_TIME), json_values).map(list)
pairs = st.one_of(
    valid_pair,
    valid_pair,
    valid_pair,
    valid_pair,
    st.tuples(times, json_values).map(list),
    st.lists(st.integers(0, 5), max_size=3),  # too short or too long
    json_values,
)
seqs = st.one_of(
    st.integers(1, SEQ_MAX),
    st.integers(1, 9),
    st.sampled_from([0, -1, SEQ_MAX + 1, True, "1", 1.5]),
)


@st.composite
def bodies(draw: Any, frame: bool) -> dict[str, Any]:
    records = draw(st.lists(valid_pair, max_size=6) | st.lists(pairs, max_size=6))
    body: dict[str, Any] = {"seq": draw(seqs), "records": records}
    if frame:
        body["type"] = draw(st.sampled_from(["push", "push", "advance"]))
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(["extra", "seq", "records"]))] = draw(json_values)
    return body


def model(raw: bytes, frame: bool) -> Any:
    try:
        return ClientFrame.validate_json(raw) if frame else Push.model_validate_json(raw)
    except ValidationError:
        return None


@pytest.mark.parametrize("frame", [False, True])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_fast_path_agrees_with_the_models(frame: bool, data: st.DataObject) -> None:
    raw = json.dumps(data.draw(bodies(frame))).encode()  # orjson cannot write 2**64
    fast = plain_push(raw, frame=frame)
    slow = model(raw, frame)
    event("fast path" if fast is not None else "models" if slow is not None else "refused")
    if fast is not None:
        assert slow is not None and (not frame or isinstance(slow, PushFrame))
        seq, fast_times, fast_records = fast.seq, fast.times, fast.records
        if fast_times:
            assert (fast.first, fast.last) == (min(fast_times), max(fast_times))
        assert (seq, list(fast_times), list(fast_records)) == (
            slow.seq,
            [t for t, _ in slow.records],
            [r for _, r in slow.records],
        )
    elif slow is not None and isinstance(slow, Push | PushFrame):
        # The models took it: it must hold a time the fast path leaves to them.
        assert any(type(t) is not int for t, _ in slow.records)


def test_examples() -> None:
    assert plain_push(b'{"seq": 1, "records": []}') == PlainPush(1, (), (), 0, 0)
    assert plain_push(b'{"type": "push", "seq": 2, "records": [[0, 1]]}', frame=True) == (
        PlainPush(2, (0,), (1,), 0, 0)
    )
    assert plain_push(b'{"seq": 1, "records": [[0, 1], "ab"]}') is None
    assert plain_push(b'{"seq": 1, "records": [[0, 1], {"a": 1, "b": 2}]}') is None
    assert plain_push(b'{"seq": 1, "records": [[0, 1], [1, 2, 3]]}') is None
    assert plain_push(b'{"seq": 1, "records": [[0, 1], 5]}') is None
    # Sums of times that are ints although a time is not: a bool, or floats cancelling out.
    assert plain_push(b'{"seq": 1, "records": [[0, "a"], [true, "b"]]}') is None
    assert plain_push(b'{"seq": 1, "records": [[1.5, "a"], [-1.5, "b"]]}') is None
    assert plain_push('{"seq": 1, "records": [[2, true], [2, false]]}') == PlainPush(
        1, (2, 2), (True, False), 2, 2
    )
    assert plain_push(b'{"seq": 1, "records": [[0, 1]], "x": 1}') is None
    assert plain_push(b'{"seq": 1, "records": [[true, 1]]}') is None
    assert plain_push(b"not json") is None
