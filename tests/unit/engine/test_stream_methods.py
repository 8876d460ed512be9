"""Stream's operator methods: declared in operators.stream, attached by their modules."""

import subprocess
import sys
from pathlib import Path

import pytest

import operators.public  # noqa: F401  (attaches every operator's methods)
from operators.stream import Stream, attach, unattached

REPO_ROOT = Path(__file__).resolve().parents[3]


def run_python(code: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_every_declared_method_is_attached_once_operators_is_loaded() -> None:
    assert unattached() == []


@pytest.mark.parametrize("name", ["Stream", "run", "Worker", "Capability"])
def test_any_public_name_attaches_every_method(name: str) -> None:
    code = (
        f"from operators import {name}\n"
        "from operators.stream import unattached\n"
        "print(unattached())\n"
    )
    assert run_python(code) == ["[]"]


def test_the_stream_core_alone_attaches_nothing_and_says_so() -> None:
    code = (
        "from operators.stream import Stream, unattached\n"
        "print('map' in unattached(), 'join' in unattached(), 'probe' in unattached())\n"
        "try:\n"
        "    Stream.map(None, None)\n"
        "except NotImplementedError as error:\n"
        "    print('import operators' in str(error))\n"
    )
    assert run_python(code) == ["True True False", "True"]


def test_a_method_is_the_operator_function_itself() -> None:
    from operators.map import map_stream

    assert Stream.map is map_stream


def test_only_a_declared_unattached_method_can_be_attached() -> None:
    with pytest.raises(TypeError, match="not a declared operator method"):
        attach(Stream.map)  # attached already: this is the operator's function
    with pytest.raises(TypeError, match="not a declared operator method"):
        attach(Stream.probe)  # part of the stream core
