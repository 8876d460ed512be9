"""Source and Target locations."""

import pickle

import pytest

from operators.progress.location import Location, Source, Target, location_key


def test_locations_are_equal_and_hash_by_value():
    assert Source(1, 0) == Source(1, 0)
    assert hash(Source(1, 0)) == hash(Source(1, 0))
    assert Target(2, 1) == Target(2, 1)
    assert Source(1, 0) != Source(1, 1)
    assert Source(1, 0) != Source(2, 0)
    assert len({Source(1, 0), Source(1, 0), Target(2, 1), Target(2, 1)}) == 2


def test_source_and_target_with_the_same_fields_differ():
    assert Source(1, 0) != Target(1, 0)
    assert Target(1, 0) != Source(1, 0)
    table = {Source(1, 0): "out", Target(1, 0): "in"}
    assert len(table) == 2
    assert table[Source(1, 0)] == "out"
    assert table[Target(1, 0)] == "in"


def test_locations_are_immutable():
    location = Source(1, 0)
    with pytest.raises(AttributeError):
        location.node = 2  # type: ignore[misc]
    assert location == Source(1, 0)


def test_fields_and_repr():
    assert Source(3, 4).node == 3
    assert Source(3, 4).port == 4
    assert repr(Source(1, 0)) == "Source(1, 0)"
    assert repr(Target(2, 5)) == "Target(2, 5)"


def test_each_kind_orders_by_node_then_port():
    assert sorted([Target(2, 0), Target(1, 1), Target(1, 0)]) == [
        Target(1, 0),
        Target(1, 1),
        Target(2, 0),
    ]
    assert Source(0, 9) < Source(1, 0)


def test_natural_order_is_the_location_key_order():
    assert Target(1, 0) < Source(1, 0)
    assert Source(1, 5) < Target(2, 0)
    assert Source(0, 9) < Target(1, 0)
    mixed = [Source(2, 0), Target(2, 0), Source(1, 1), Target(1, 1), Source(1, 0)]
    assert sorted(mixed) == sorted(mixed, key=location_key)
    assert sorted(mixed) == [Target(1, 1), Source(1, 0), Source(1, 1), Target(2, 0), Source(2, 0)]


def test_locations_survive_pickling_with_their_kind():
    for location in (Source(3, 1), Target(3, 1)):
        copy = pickle.loads(pickle.dumps(location))
        assert copy == location
        assert type(copy) is type(location)
        assert (copy.node, copy.port) == (3, 1)


@pytest.mark.parametrize(
    ("location", "key"),
    [
        (Target(1, 0), (1, 0, 0)),
        (Source(1, 0), (1, 1, 0)),
        (Target(3, 2), (3, 0, 2)),
        (Source(0, 5), (0, 1, 5)),
    ],
)
def test_location_key_values(location, key):
    assert location_key(location) == key


def test_location_key_orders_by_node_then_targets_before_sources_then_port():
    mixed = [Source(1, 1), Source(0, 0), Target(1, 1), Source(1, 0), Target(1, 0), Target(0, 3)]
    assert sorted(mixed, key=location_key) == [
        Target(0, 3),
        Source(0, 0),
        Target(1, 0),
        Target(1, 1),
        Source(1, 0),
        Source(1, 1),
    ]


def test_location_alias_covers_both_kinds():
    assert isinstance(Source(1, 0), Location)
    assert isinstance(Target(1, 0), Location)
    assert not isinstance((1, 0), Location)
