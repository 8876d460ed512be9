#!/usr/bin/env bash
# Set up .venv (if needed) and run the main job: python -m service "$@".
set -euo pipefail
cd "$(dirname "$0")"

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi

# Reinstall only when pyproject.toml changed: the stamp name carries its sha1.
sha=$(.venv/bin/python -c 'import hashlib; print(hashlib.sha1(open("pyproject.toml", "rb").read()).hexdigest())')
stamp=".venv/.frontier-installed-$sha"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
    rm -f .venv/.frontier-installed-*
    touch "$stamp"
fi

# The main job: the server on 127.0.0.1:8080 with a demo dataflow; it prints how to push to
# it and watch it. Extra arguments go to `frontier serve` (e.g. --port 9000 --workers 2).
exec .venv/bin/python -m api serve --demo "$@"
