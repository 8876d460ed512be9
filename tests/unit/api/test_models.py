"""The request models: what they accept, what they refuse, and where they say the problem is."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from api.models import (
    TIME_ERROR,
    Advance,
    AdvanceFrame,
    ClientFrame,
    CloseFrame,
    Commit,
    CreateDataflow,
    OpenSession,
    Push,
    PushFrame,
    Stage,
    problem_from_validation_error,
    time_from_json,
    time_to_json,
)
from operators.progress import MAX_TIME, Product
from service.app.settings import Limits

Parser = type[BaseModel] | TypeAdapter[Any]


def parse(model: Parser, body: Any) -> Any:
    """Parse ``body`` (encoded to JSON bytes unless it is bytes) as the server does."""
    # json, not orjson, encodes the test bodies: orjson refuses integers over 64 bits.
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    if isinstance(model, TypeAdapter):
        return model.validate_json(data)
    return model.model_validate_json(data)


def problems(model: Parser, body: Any) -> list[tuple[str, str]]:
    """The (pointer, detail) of every problem with ``body``; fails if there is none."""
    with pytest.raises(ValidationError) as caught:
        parse(model, body)
    return [(p["pointer"], p["detail"]) for p in problem_from_validation_error(caught.value)]


def pointers(model: Parser, body: Any) -> list[str]:
    return [pointer for pointer, _detail in problems(model, body)]


# --------------------------------------------------------------------------- valid bodies


def test_create_dataflow() -> None:
    graph = {"nodes": {"in": {"op": "input"}}, "edges": [], "anything": [1, {"x": None}]}
    body = parse(CreateDataflow, {"name": "demo", "graph": graph})
    assert (body.name, body.graph) == ("demo", graph)
    assert parse(CreateDataflow, {"graph": {}}).name is None
    assert parse(CreateDataflow, {"graph": {}, "name": None}).name is None
    assert parse(CreateDataflow, {"graph": {}, "name": "n" * 200}).name == "n" * 200


def test_open_session() -> None:
    assert parse(OpenSession, {}).start is None
    assert parse(OpenSession, {"start": None}).start is None
    assert parse(OpenSession, {"start": 7}).start == 7
    assert parse(OpenSession, {"start": [[1, 2], 3]}).start == Product(Product(1, 2), 3)


def test_push() -> None:
    body = parse(Push, {"seq": 3, "records": [[0, "a"], [[1, 2], {"k": [1, None]}], [9, None]]})
    assert body.seq == 3
    assert body.records == [(0, "a"), (Product(1, 2), {"k": [1, None]}), (9, None)]
    assert type(body.records[1][0]) is Product
    assert parse(Push, {"seq": 1, "records": []}).records == []


def test_push_has_no_hard_coded_batch_limit() -> None:
    # The server bounds batches with its configured max_batch_records (429), not the model.
    count = Limits().max_batch_records + 1
    body = parse(Push, {"seq": 1, "records": [[0, i] for i in range(count)]})
    assert len(body.records) == count


def test_advance() -> None:
    assert parse(Advance, {"time": 5}) == Advance(time=5, seq=None)
    assert parse(Advance, {"time": [5, 0], "seq": 2}) == Advance(time=Product(5, 0), seq=2)
    assert parse(Advance, {"time": 5, "seq": None}).seq is None


def test_stage() -> None:
    assert parse(Stage, {"records": [[0, 1], [0, 2]]}).records == [(0, 1), (0, 2)]
    assert parse(Stage, {"records": []}).records == []


def test_commit() -> None:
    body = parse(Commit, {"transactions": ["t1", "t2"], "idempotency_key": "k", "advance_to": 4})
    assert (body.transactions, body.idempotency_key, body.advance_to) == (["t1", "t2"], "k", 4)
    assert parse(Commit, {"transactions": ["t"], "idempotency_key": "k"}).advance_to is None
    most = [str(i) for i in range(1000)]
    assert parse(Commit, {"transactions": most, "idempotency_key": "k" * 200}).transactions == most


def test_client_frames_are_a_union_tagged_by_type() -> None:
    push = parse(ClientFrame, {"type": "push", "seq": 1, "records": [[0, "a"]]})
    advance = parse(ClientFrame, {"type": "advance", "seq": 2, "time": [1, 0]})
    close = parse(ClientFrame, {"type": "close"})
    assert push == PushFrame(type="push", seq=1, records=[(0, "a")])
    assert advance == AdvanceFrame(type="advance", seq=2, time=Product(1, 0))
    assert close == CloseFrame(type="close")


def test_models_dump_times_in_their_json_form() -> None:
    body = parse(Commit, {"transactions": ["t"], "idempotency_key": "k", "advance_to": [[1, 0], 2]})
    assert body.advance_to == Product(Product(1, 0), 2)
    assert orjson.loads(body.model_dump_json())["advance_to"] == [[1, 0], 2]
    frame = parse(ClientFrame, {"type": "push", "seq": 1, "records": [[[0, 1], "a"]]})
    assert orjson.loads(ClientFrame.dump_json(frame)) == {
        "type": "push",
        "seq": 1,
        "records": [[[0, 1], "a"]],
    }


def test_models_are_immutable() -> None:
    body = parse(Push, {"seq": 1, "records": []})
    with pytest.raises(ValidationError):
        body.seq = 2


def test_json_schemas_can_be_generated() -> None:
    for model in (CreateDataflow, OpenSession, Push, Advance, Stage, Commit):
        assert model.model_json_schema()["additionalProperties"] is False
    schema = ClientFrame.json_schema()
    assert schema["discriminator"]["propertyName"] == "type"
    time = Advance.model_json_schema()["properties"]["time"]
    assert time["title"] == "Time"


# --------------------------------------------------------------------------- pointers

BAD_BODIES = [
    # A bad time points at the time itself.
    (Push, {"seq": 1, "records": [[0, 1], [1, 1], [2, 1], ["3", 1]]}, ["/records/3/0"]),
    (Push, {"seq": 1, "records": [[[1, -1], "x"]]}, ["/records/0/0"]),
    (Push, {"seq": 1, "records": [[[1, 2, 3], "x"]]}, ["/records/0/0"]),
    (Push, {"seq": 1, "records": [[2**64, "x"]]}, ["/records/0/0"]),
    (Push, {"seq": 1, "records": [[0]]}, ["/records/0/1"]),
    (Push, {"seq": 1, "records": [[0, 1, 2]]}, ["/records/0"]),
    (Push, {"seq": 1, "records": [0]}, ["/records/0"]),
    (Push, {"seq": 1, "records": {"0": [0, 1]}}, ["/records"]),
    (Push, {"seq": 0, "records": []}, ["/seq"]),
    (Push, {"records": []}, ["/seq"]),
    (Push, {"seq": 1}, ["/records"]),
    (Push, {"seq": "x", "records": [[-1, 0]], "extra": 1}, ["/seq", "/records/0/0", "/extra"]),
    (Push, [], [""]),
    (Push, b"{not json", [""]),
    (Push, {"seq": 1, "records": [], "a/b~c": 1}, ["/a~1b~0c"]),
    (Advance, {"time": None}, ["/time"]),
    (Advance, {"time": 1, "seq": 0}, ["/seq"]),
    (Advance, {}, ["/time"]),
    (OpenSession, {"start": [1]}, ["/start"]),
    (OpenSession, {"start": {"outer": 1, "inner": 2}}, ["/start"]),
    (Stage, {"records": [[0, "a"], [-5, "b"]]}, ["/records/1/0"]),
    (CreateDataflow, {"graph": [], "name": "x" * 201}, ["/name", "/graph"]),
    (CreateDataflow, {"name": "x"}, ["/graph"]),
    (CreateDataflow, {"graph": {}, "dry_run": True}, ["/dry_run"]),
    (Commit, {"transactions": [], "idempotency_key": "k"}, ["/transactions"]),
    (Commit, {"transactions": ["a", "b", "a"], "idempotency_key": "k"}, ["/transactions"]),
    (Commit, {"transactions": ["a", ""], "idempotency_key": "k"}, ["/transactions/1"]),
    (Commit, {"transactions": ["a" * 201], "idempotency_key": "k"}, ["/transactions/0"]),
    (
        Commit,
        {"transactions": [str(i) for i in range(1001)], "idempotency_key": "k"},
        ["/transactions"],
    ),
    (Commit, {"transactions": ["a"], "idempotency_key": ""}, ["/idempotency_key"]),
    (Commit, {"transactions": ["a"], "idempotency_key": "k" * 201}, ["/idempotency_key"]),
    (
        Commit,
        {"transactions": ["a"], "idempotency_key": "k", "advance_to": [1, [2]]},
        ["/advance_to"],
    ),
    # Frames: the tag pydantic puts first in ``loc`` is not part of the frame.
    (ClientFrame, {"type": "push", "seq": 1, "records": [[0, 1], [-1, 2]]}, ["/records/1/0"]),
    (ClientFrame, {"type": "advance", "time": 1}, ["/seq"]),
    (ClientFrame, {"type": "advance", "seq": 1, "time": "1"}, ["/time"]),
    (ClientFrame, {"type": "close", "seq": 1}, ["/seq"]),
    (ClientFrame, {"type": "ack"}, ["/type"]),
    (ClientFrame, {"seq": 1, "records": []}, ["/type"]),
    (ClientFrame, [], [""]),
]


@pytest.mark.parametrize(("model", "body", "expected"), BAD_BODIES, ids=lambda v: str(v)[:50])
def test_problems_point_at_the_offending_part(
    model: Parser, body: Any, expected: list[str]
) -> None:
    assert pointers(model, body) == expected


def test_problem_details() -> None:
    assert problems(Push, {"seq": 1, "records": [["0", 1]], "x": 1}) == [
        ("/records/0/0", TIME_ERROR),
        ("/x", "unknown field"),
    ]
    assert problems(Push, {"records": []}) == [("/seq", "required")]
    assert problems(Commit, {"transactions": ["a", "a"], "idempotency_key": "k"}) == [
        ("/transactions", "transaction 'a' is listed more than once")
    ]
    assert problems(ClientFrame, {"type": "nope"}) == [
        ("/type", 'type must be one of "advance", "close", "push"')
    ]
    [(pointer, detail)] = problems(Push, b"[1,")
    assert pointer == "" and detail.startswith("Invalid JSON")


def test_invalid_json_is_told_apart_from_a_wrong_shape() -> None:
    # The server answers 400 for the first and 422 for the second.
    with pytest.raises(ValidationError) as caught:
        Push.model_validate_json(b'{"seq": 1,')
    assert [e["type"] for e in caught.value.errors()] == ["json_invalid"]


# --------------------------------------------------------------------------- strictness

STRICT = [
    (Push, {"seq": "1", "records": []}, "/seq"),
    (Push, {"seq": 1.0, "records": []}, "/seq"),
    (Push, {"seq": True, "records": []}, "/seq"),
    (Push, {"seq": 1, "records": [["1", "a"]]}, "/records/0/0"),
    (Push, {"seq": 1, "records": [[1.0, "a"]]}, "/records/0/0"),
    (Push, {"seq": 1, "records": [[True, "a"]]}, "/records/0/0"),
    (Push, {"seq": 1, "records": [[[0, False], "a"]]}, "/records/0/0"),
    (Advance, {"time": "5"}, "/time"),
    (Advance, {"time": 5, "seq": "2"}, "/seq"),
    (OpenSession, {"start": "0"}, "/start"),
    (CreateDataflow, {"graph": {}, "name": 5}, "/name"),
    (CreateDataflow, {"graph": "{}"}, "/graph"),
    (Commit, {"transactions": "a", "idempotency_key": "k"}, "/transactions"),
    (Commit, {"transactions": [1], "idempotency_key": "k"}, "/transactions/0"),
    (Commit, {"transactions": ["a"], "idempotency_key": 1}, "/idempotency_key"),
    (ClientFrame, {"type": "push", "seq": "1", "records": []}, "/seq"),
]


@pytest.mark.parametrize(("model", "body", "pointer"), STRICT, ids=lambda v: str(v)[:50])
def test_no_coercion(model: Parser, body: Any, pointer: str) -> None:
    assert pointers(model, body) == [pointer]


EXTRA = [
    (CreateDataflow, {"graph": {}, "id": "x"}),
    (OpenSession, {"start": 0, "seq": 1}),
    (Push, {"seq": 1, "records": [], "type": "push"}),
    (Advance, {"time": 1, "records": []}),
    (Stage, {"records": [], "seq": 1}),
    (Commit, {"transactions": ["a"], "idempotency_key": "k", "seq": 1}),
    (ClientFrame, {"type": "push", "seq": 1, "records": [], "credits": 1}),
    (ClientFrame, {"type": "advance", "seq": 1, "time": 1, "records": []}),
    (ClientFrame, {"type": "close", "reason": "done"}),
]


@pytest.mark.parametrize(("model", "body"), EXTRA, ids=lambda v: str(v)[:50])
def test_unknown_fields_are_refused(model: Parser, body: Any) -> None:
    extra = next(key for key in body if key not in _fields(model, body))
    assert problems(model, body) == [(f"/{extra}", "unknown field")]


def _fields(model: Parser, body: dict[str, Any]) -> set[str]:
    if isinstance(model, TypeAdapter):
        tagged = {"push": PushFrame, "advance": AdvanceFrame, "close": CloseFrame}
        return set(tagged[body["type"]].model_fields)
    return set(model.model_fields)


# --------------------------------------------------------------------------- times


@pytest.mark.parametrize(
    ("value", "time"),
    [
        (0, 0),
        (MAX_TIME, MAX_TIME),
        ([1, 2], Product(1, 2)),
        ([[1, 0], 2], Product(Product(1, 0), 2)),
        ([0, [1, [2, MAX_TIME]]], Product(0, Product(1, Product(2, MAX_TIME)))),
    ],
)
def test_time_round_trip(value: Any, time: Any) -> None:
    assert time_from_json(value) == time
    assert type(time_from_json(value)) is type(time)
    assert time_to_json(time) == value
    assert orjson.loads(orjson.dumps(time_to_json(time_from_json(value)))) == value


@pytest.mark.parametrize(
    "value", [-1, 2**64, "1", 1.0, True, None, [], [1], [1, 2, 3], (1, 2), [1, "2"], {"o": 1}]
)
def test_not_a_time(value: Any) -> None:
    with pytest.raises(ValueError, match="not a time"):
        time_from_json(value)


def test_time_from_json_is_idempotent() -> None:
    for time in (0, Product(1, 2), Product(Product(0, MAX_TIME), 3)):
        assert time_from_json(time) == time
        assert time_from_json(time_from_json(time)) == time
    for bad in (Product(1, -1), Product("1", 2), Product(True, 2), Product(1, 2.0)):
        with pytest.raises(ValueError):
            time_from_json(bad)


def test_time_to_json_refuses_what_is_not_a_time() -> None:
    with pytest.raises(TypeError):
        time_to_json("1")
    with pytest.raises(ValueError):
        time_to_json(Product(1, -1))


def _times(depth: int) -> st.SearchStrategy[Any]:
    integers = st.integers(min_value=0, max_value=MAX_TIME)
    if depth == 0:
        return integers
    return st.builds(Product, _times(depth - 1), integers)


@given(st.integers(min_value=0, max_value=3).flatmap(_times))
def test_time_round_trip_property(time: Any) -> None:
    value = orjson.loads(orjson.dumps(time_to_json(time)))
    assert time_from_json(value) == time
    # The models decode times exactly as time_from_json does.
    assert parse(Advance, {"time": value}).time == time
