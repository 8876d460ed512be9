"""The catalogue on a real SQLite file: dataflows in order, consumers, versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from operators.progress import Product
from service.store.catalogue import (
    FILE,
    MIGRATIONS,
    VERSION,
    Catalogue,
    NewerCatalogue,
    Shape,
)


def test_dataflows_come_back_in_creation_order_after_reopening(tmp_path: Path) -> None:
    catalogue = Catalogue(tmp_path)
    assert catalogue.add_dataflow("b", "t", "first", {"g": 1}, 10.0) == 1
    assert catalogue.add_dataflow("a", "u", "", {"g": [2, "x"]}, 11.0) == 2
    catalogue.add_dataflow("c", "t", "third", {}, 12.0)
    catalogue.set_status("a", "failed", "ValueError: no")
    catalogue.commit_consumer("b", "out", "spark", 5)
    catalogue.commit_consumer("b", "out", "spark", Product(7, 1))
    catalogue.commit_consumer("b", "out", "other", None)
    catalogue.commit_consumer("c", "out", "spark", 1)
    catalogue.drop_dataflow("c")
    catalogue.close()
    again = Catalogue(tmp_path)
    assert [
        (d.position, d.id, d.tenant, d.name, d.graph, d.created_at) for d in again.dataflows()
    ] == [
        (1, "b", "t", "first", {"g": 1}, 10.0),
        (2, "a", "u", "", {"g": [2, "x"]}, 11.0),
    ]
    assert [(d.status, d.error) for d in again.dataflows()] == [
        ("running", None),
        ("failed", "ValueError: no"),
    ]
    assert again.consumers("b") == [("out", "other", None), ("out", "spark", Product(7, 1))]
    assert again.consumers("c") == []
    again.forget_consumer("b", "out", "other")
    assert again.consumers("b") == [("out", "spark", Product(7, 1))]
    # A new dataflow never takes a dropped one's position: creation order stays total.
    assert again.add_dataflow("d", "t", "", {}, 13.0) == 4


def test_an_older_directory_is_migrated_and_a_newer_one_refused(tmp_path: Path) -> None:
    Catalogue(tmp_path).close()
    assert Catalogue(tmp_path).version == VERSION
    path = tmp_path / FILE
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(NewerCatalogue) as caught:
        Catalogue(tmp_path)
    assert str(caught.value) == (
        f"{path} has schema version {VERSION + 1}, written by a newer release of Frontier; "
        f"this release reads versions up to {VERSION}: run the newer release, or start with "
        "another data directory"
    )
    assert path.read_bytes() == before


def test_a_fresh_file_is_at_version_zero_until_migrated(tmp_path: Path) -> None:
    path = tmp_path / FILE
    sqlite3.connect(path).close()
    catalogue = Catalogue(tmp_path)
    assert catalogue.version == VERSION
    tables = {
        name
        for (name,) in sqlite3.connect(path).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    assert tables == {"dataflows", "consumers", "meta", "sqlite_sequence"}


def test_a_directory_of_the_first_schema_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / FILE
    with sqlite3.connect(path) as db:  # as the release with schema 1 left it
        db.executescript(MIGRATIONS[0])
        db.execute(
            "INSERT INTO dataflows (id, tenant, name, graph, created_at, status) "
            "VALUES ('old', 't', 'kept', '{}', 1.0, 'running')"
        )
        db.execute("PRAGMA user_version = 1")
    catalogue = Catalogue(tmp_path)
    assert catalogue.version == VERSION == 3
    [old] = catalogue.dataflows()
    assert (old.id, old.name, old.status, old.truncated_before, old.holders) == (
        "old",
        "kept",
        "running",
        0,
        None,
    )
    catalogue.truncated("old", 40)
    assert [d.truncated_before for d in catalogue.dataflows()] == [40]
    assert catalogue.shape() is None


def test_a_directory_of_the_second_schema_gets_a_shape_and_holders(tmp_path: Path) -> None:
    path = tmp_path / FILE
    with sqlite3.connect(path) as db:  # as the release with schema 2 left it
        db.executescript(MIGRATIONS[0] + MIGRATIONS[1])
        db.execute(
            "INSERT INTO dataflows (id, tenant, name, graph, created_at, status, "
            "truncated_before) VALUES ('old', 't', 'kept', '{}', 1.0, 'running', 7)"
        )
        db.execute("INSERT INTO consumers VALUES ('old', 'out', 'spark', '3')")
        db.execute("PRAGMA user_version = 2")
    catalogue = Catalogue(tmp_path)
    assert catalogue.version == 3
    [old] = catalogue.dataflows()
    assert (old.id, old.truncated_before, old.holders) == ("old", 7, None)
    assert catalogue.consumers("old") == [("out", "spark", 3)]
    assert (catalogue.shape(), catalogue.meta("shape")) == (None, None)
    catalogue.set_holders("old", {"words": 2, "lines": 0})
    catalogue.set_shape(Shape(3, 2), 1)
    catalogue.close()
    again = Catalogue(tmp_path)
    assert [d.holders for d in again.dataflows()] == [{"words": 2, "lines": 0}]
    assert again.shape() == (Shape(3, 2), 1)
    assert (again.meta("shape"), again.meta("process")) == ({"processes": 3, "workers": 2}, 1)
    again.set_shape(Shape(1, 1), 0)
    assert again.shape() == (Shape(1, 1), 0)
    assert str(Shape(1, 1)) == "1 process x 1 worker"


def test_a_new_dataflow_keeps_its_holders(tmp_path: Path) -> None:
    catalogue = Catalogue(tmp_path)
    catalogue.add_dataflow("a", "t", "", {}, 1.0, {"x": 1})
    catalogue.add_dataflow("b", "t", "", {}, 2.0)
    assert [(d.id, d.holders) for d in catalogue.dataflows()] == [("a", {"x": 1}), ("b", None)]
