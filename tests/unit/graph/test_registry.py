"""The operator registry: one entry per operator, built-in or a deployer's."""

from collections.abc import Iterator

import pytest

from operators.graph import CATALOGUE, OpKind, Param, register_operator
from operators.graph.registry import PARAM_KINDS, builtin, describe_kind


@pytest.fixture(autouse=True)
def restore_catalogue() -> Iterator[None]:
    before = dict(CATALOGUE)
    yield
    CATALOGUE.clear()
    CATALOGUE.update(before)


def test_every_built_in_operator_is_one_entry_with_one_builder() -> None:
    for name, kind in CATALOGUE.items():
        assert kind.name == name
        builders = [b for b in (kind.build, kind.build_loop, kind.builder) if b is not None]
        assert len(builders) == 1, name
        assert kind.builder is None, (
            f"{name}: built-ins are built from the node, not (inputs, params)"
        )
        assert all(p.kind in PARAM_KINDS for p in kind.params.values()), name


def test_the_structural_flags() -> None:
    assert [n for n, k in CATALOGUE.items() if k.is_loop] == ["feedback"]
    assert sorted(n for n, k in CATALOGUE.items() if k.in_root) == ["input", "output"]
    assert [n for n, k in CATALOGUE.items() if k.spans_times] == ["delay"]


def test_a_built_in_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="'map' is registered twice"):
        builtin(OpKind("map", 1, 1, build=lambda node: list(node.inputs)))


def test_a_kind_has_exactly_one_builder() -> None:
    with pytest.raises(ValueError, match="more than one builder"):
        register_operator(
            OpKind(
                "both",
                1,
                1,
                builder=lambda inputs, params: inputs,
                build=lambda node: list(node.inputs),
            )
        )
    assert "both" not in CATALOGUE


def test_a_deployer_may_register_the_built_in_form() -> None:
    kind = OpKind("same", 1, 1, {"n": Param("int")}, build=lambda node: list(node.inputs))
    register_operator(kind)
    assert CATALOGUE["same"] is kind
    assert describe_kind(kind)["params"] == {
        "n": {"kind": "int", "required": True, "minimum": 0, "maximum": 2**63 - 1}
    }


def test_a_loop_operator_is_not_built_as_another() -> None:
    with pytest.raises(TypeError, match="'feedback' is built with build_loop"):
        CATALOGUE["feedback"].build_node(None)  # type: ignore[arg-type]
