#!/usr/bin/env bash
# Set up .venv with the dev extra (if needed), then run every check, stopping at the first failure.
# Extra arguments are passed to pytest, e.g. ./test.sh -m 'not slow' or ./test.sh tests/unit.
set -euo pipefail
cd "$(dirname "$0")"

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi

# Reinstall only when pyproject.toml changed: the stamp name carries its sha1.
sha=$(.venv/bin/python -c 'import hashlib; print(hashlib.sha1(open("pyproject.toml", "rb").read()).hexdigest())')
stamp=".venv/.frontier-dev-installed-$sha"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
    rm -f .venv/.frontier-dev-installed-*
    touch "$stamp"
fi

step() {
    echo "==> $*"
}

step "ruff check"
.venv/bin/ruff check .
step "ruff format --check"
.venv/bin/ruff format --check .
step "mypy"
.venv/bin/mypy
step "lint-imports (layer contracts)"
.venv/bin/lint-imports
step "pytest"
.venv/bin/python -m pytest "$@"
