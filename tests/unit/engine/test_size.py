"""Functions in the engine (all of operators/) stay small: at most 60 lines, and within ruff's
C901 (complexity 15) and PLR0915 (50 statements), which pyproject.toml enforces on the whole
tree but tests and benchmarks (tests/unit/test_shape.py); here they are checked with the
per-file ignores cleared, whatever pyproject says."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "operators"
MAX_LINES = 60


def test_no_function_is_over_60_lines() -> None:
    long: list[str] = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines}")
    assert long == []


def test_ruff_finds_no_complex_or_long_function() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--select",
            "C901,PLR0915",
            "--config",
            "lint.per-file-ignores={}",
            "--output-format",
            "concise",
            "operators",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.stdout.splitlines()[-1:] == ["All checks passed!"], result.stdout
