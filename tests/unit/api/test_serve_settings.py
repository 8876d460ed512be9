"""``frontier serve``: where each setting comes from (flag > environment > config > default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import api.cli
import api.cli.serving
import api.server.logs
from service.app import Settings


def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
) -> Settings:
    """The settings ``serve`` would start the server with (the server itself is not started)."""
    seen: list[Settings] = []

    async def start(settings: Settings, demo: bool, access_log: str = "control") -> None:
        seen.append(settings)

    monkeypatch.setattr(api.cli.serving, "_serve", start)
    # Leave this process's logging as it is: serve would make the root logger log JSON.
    monkeypatch.setattr(api.server.logs, "configure_logging", lambda fmt: None)
    for name in ("FRONTIER_HOST", "FRONTIER_PORT", "FRONTIER_WORKERS", "FRONTIER_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "settings.yaml"
    config.write_text("host: 127.0.0.2\nport: 9000\nworkers: 2\nlimits:\n  max_batch_records: 7\n")
    result = CliRunner().invoke(api.cli.main, ["serve", "--config", str(config), *args], env=env)
    assert result.exit_code == 0, result.output
    [settings] = seen
    return settings


def test_the_config_file_beats_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = served(tmp_path, monkeypatch, [], {})
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.2", 9000, 2)
    assert settings.limits.max_batch_records == 7


def test_flags_and_environment_beat_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = served(tmp_path, monkeypatch, ["--port", "9100"], {"FRONTIER_WORKERS": "3"})
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.2", 9100, 3)


def test_a_flag_beats_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings: Any = served(tmp_path, monkeypatch, ["--port", "9200"], {"FRONTIER_PORT": "9300"})
    assert settings.port == 9200


@pytest.mark.parametrize("depth", [0, 247])
def test_a_record_depth_no_answer_could_encode_is_refused_at_start(
    tmp_path: Path, depth: int
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(f"limits:\n  max_record_depth: {depth}\n")
    result = CliRunner().invoke(api.cli.main, ["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert (
        f"Invalid value for limits: max_record_depth must be in [1, 246], not {depth}: answers "
        "wrap a record in up to 8 levels, and orjson encodes at most 254"
    ) in " ".join(result.output.split())
