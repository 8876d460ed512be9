#!/usr/bin/env bash
# Set up .venv with the dev and spark extras (if needed), then run every check, stopping at the
# first failure.
# Extra arguments are passed to pytest, e.g. ./test.sh -m 'not slow' or ./test.sh tests/unit.
set -euo pipefail
cd "$(dirname "$0")"

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi

# Reinstall only when pyproject.toml (or the extras) changed: the stamp name carries both.
extras="dev,spark"
sha=$(.venv/bin/python -c 'import hashlib; print(hashlib.sha1(open("pyproject.toml", "rb").read()).hexdigest())')
stamp=".venv/.frontier-dev-installed-${extras/,/-}-$sha"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
    # pyspark (the spark extra, for tests/spark) is large: it is downloaded once; later
    # reinstalls find it already satisfied.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]"
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
