"""What the ``frontier`` commands share: where the server is, documents, errors, the loop.

Every client command takes :data:`url_option` and :data:`token_option`, runs its calls with
:func:`asyncio_run` and reports the client's errors with :func:`fail`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from api.client import FrontierConnectionError, FrontierError

url_option = click.option("--url", help="The server (default $FRONTIER_URL or local 8080).")
token_option = click.option("--token", help="A bearer token (default $FRONTIER_TOKEN).")


def server_url(url: str | None) -> str:
    """The server to talk to: ``--url``, else ``$FRONTIER_URL``, else local port 8080."""
    return url or os.environ.get("FRONTIER_URL", "http://127.0.0.1:8080")


def bearer_token(token: str | None) -> str | None:
    """The token to send: ``--token``, else ``$FRONTIER_TOKEN`` (``None``: send none)."""
    return token or os.environ.get("FRONTIER_TOKEN") or None


def load_document(path: str) -> Any:
    """A YAML or JSON file (``-``: standard input), parsed.

    A ``.yaml``/``.yml`` file is YAML; anything else is read as JSON, and as YAML if it is
    not JSON.
    """
    text = Path(path).read_text() if path != "-" else sys.stdin.read()
    if path.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return yaml.safe_load(text)


def fail(error: FrontierError | FrontierConnectionError) -> NoReturn:
    """Report a refused request (with each of its problems) or a lost server, and exit 1."""
    if isinstance(error, FrontierConnectionError):
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1)
    click.echo(f"error {error.status}: {error.problem.get('detail')}", err=True)
    for problem in error.problem.get("problems") or []:
        click.echo(f"  {problem.get('pointer') or '/'}: {problem.get('detail')}", err=True)
    raise SystemExit(1)


def asyncio_run(coroutine: Any) -> Any:
    """Run on uvloop."""
    import uvloop

    return uvloop.run(coroutine)
