"""Operators written in Python, registered by whoever deploys the server."""

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.graph import CATALOGUE, OpKind, register_operator
from service.app import DataflowManager, Invalid, Settings
from service.app import plugins as manager_module
from service.app.plugins import load_operator_plugins

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def restore_catalogue() -> Iterator[None]:
    # Registration is process-wide: undo it, so other tests see the built-in catalogue.
    before = dict(CATALOGUE)
    loaded = set(manager_module._LOADED_PLUGINS)
    yield
    CATALOGUE.clear()
    CATALOGUE.update(before)
    manager_module._LOADED_PLUGINS.clear()
    manager_module._LOADED_PLUGINS.update(loaded)


GRAPH = {
    "nodes": {
        "words": {"op": "input"},
        "loud": {"op": "shout", "marks": 2},
        "out": {"op": "output"},
    },
    "edges": [["words", "loud"], ["loud", "out"]],
}


async def test_a_configured_module_adds_an_operator_graphs_can_use() -> None:
    manager = DataflowManager(Settings(operator_modules=("plugin_operators",)))
    await manager.start()
    try:
        assert "shout" in CATALOGUE
        record = await manager.create("t", GRAPH)
        producer = manager.input("t", record.id, "words")
        session = producer.open_session()
        producer.push(session.id, 1, [(0, "hey"), (0, "you")])
        producer.close_session(session.id)
        log = manager.output("t", record.id, "out")
        for _ in range(200):
            if log.frontier().is_empty():
                break
            await asyncio.sleep(0)
        assert sorted(log.records_at(0)) == ["HEY!!", "YOU!!"]
        with pytest.raises(Invalid) as caught:
            manager.compile(
                {**GRAPH, "nodes": {**GRAPH["nodes"], "loud": {"op": "shout", "marks": 9}}}
            )
        assert caught.value.problems == [
            {"pointer": "/nodes/loud/marks", "detail": "must be an integer from 1 to 5"}
        ]
    finally:
        await manager.stop()


def test_loading_twice_registers_once() -> None:
    assert load_operator_plugins(("plugin_operators",)) == ["plugin_operators"]
    assert load_operator_plugins(("plugin_operators",)) == []
    assert "shout" in CATALOGUE


def test_built_in_operators_cannot_be_replaced() -> None:
    with pytest.raises(ValueError, match="'map' is a built-in operator"):
        register_operator(OpKind("map", 1, 1, builder=lambda inputs, params: inputs))
    with pytest.raises(ValueError, match="needs a builder"):
        register_operator(OpKind("nothing", 1, 1))
