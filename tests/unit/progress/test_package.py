"""The operators.progress package: its public surface and its purity."""

import subprocess
import sys
from pathlib import Path

import operators.progress

REPO_ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("asyncio", "aiohttp", "pydantic", "orjson", "uvloop")


def test_importing_progress_loads_no_async_or_io_library():
    code = (
        "import sys\n"
        "import operators.progress\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))\n"
        "print(operators.progress.Product.__module__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == ["[]", "operators.progress.timestamp"]


def test_every_exported_name_exists():
    assert sorted(operators.progress.__all__) == sorted(set(operators.progress.__all__))
    missing = [name for name in operators.progress.__all__ if not hasattr(operators.progress, name)]
    assert missing == []
