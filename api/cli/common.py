"""What the ``frontier`` commands share: where the server is, documents, errors, the loop.

Every client command takes :data:`url_option` and :data:`token_option` (and
:data:`json_option` when it prints data) and runs its calls with :func:`asyncio_run`. Errors
are left to :class:`FrontierGroup`, which prints each as one line (:func:`error_lines`) and
exits non-zero; ``frontier --debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import yaml

from api.client import AsyncClient, FrontierConnectionError, FrontierError

url_option = click.option("--url", help="The server (default $FRONTIER_URL or local 8080).")
token_option = click.option("--token", help="A bearer token (default $FRONTIER_TOKEN).")
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (one document, or one line per event)."
)


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
    try:
        if path.endswith((".yaml", ".yml")):
            return yaml.safe_load(text)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = "standard input" if path == "-" else path
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not YAML"
        raise click.ClickException(f"{where} is not YAML or JSON: {problem}{at}") from None


DATAFLOW_ID = re.compile(r"[0-9a-f]{32}")
"""What a dataflow's id looks like (32 hex digits): any other DATAFLOW argument is a name."""


async def dataflow_id(client: AsyncClient, dataflow: str) -> str:
    """The id of ``dataflow``: itself if it looks like an id, else the one dataflow so named.

    A name no dataflow has, or several have, is refused saying so (``GET
    /v1/dataflows?name=``).
    """
    if DATAFLOW_ID.fullmatch(dataflow):
        return dataflow
    named = await client.dataflows(name=dataflow)
    if len(named) == 1:
        return str(named[0]["id"])
    if not named:
        raise click.ClickException(
            f"no dataflow has the id or name {dataflow!r} (frontier dataflows list shows them)"
        )
    ids = ", ".join(item["id"] for item in named)
    raise click.ClickException(f"{len(named)} dataflows are named {dataflow!r} ({ids}): give an id")


def print_json(value: Any) -> None:
    """Print a JSON document, indented."""
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def print_line(value: Any) -> None:
    """Print a JSON value on one line, flushed (readers of a pipe see it at once)."""
    click.echo(orjson.dumps(value).decode())
    sys.stdout.flush()


def error_lines(error: BaseException) -> list[str]:
    """What to tell the user about an error: one line (and a refused graph's problems).

    >>> error_lines(FrontierError(404, {"title": "Not found", "detail": "no dataflow 'x'"}))
    ["error: Not found (404): no dataflow 'x'"]
    >>> error_lines(FileNotFoundError(2, "No such file or directory", "g.yaml"))
    ['error: g.yaml: No such file or directory']
    """
    if isinstance(error, FrontierConnectionError):
        return [f"error: {error} (is the server running there? give --url or $FRONTIER_URL)"]
    if isinstance(error, FrontierError):
        title = error.problem.get("title") or "refused"
        detail = error.problem.get("detail") or ""
        lines = [f"error: {title} ({error.status})" + (f": {detail}" if detail else "")]
        lines += [
            f"  {problem.get('pointer') or '/'}: {problem.get('detail')}"
            for problem in error.problem.get("problems") or []
            if problem.get("detail") != detail  # one problem is said once
        ]
        return lines
    if isinstance(error, OSError) and error.filename is not None:
        return [f"error: {error.filename}: {error.strerror}"]
    return [f"error: {type(error).__name__}: {error} (frontier --debug shows the traceback)"]


class FrontierGroup(click.Group):
    """The ``frontier`` group, which reports errors for every command.

    Every error is one line on standard error, with exit code 1 (2 for a mistaken command
    line), and a traceback only with ``--debug``.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command; report its error as :func:`error_lines` says, then exit.

        Called with ``standalone_mode=False`` (by a test, say), it is click's own: errors
        are raised as they are.
        """
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        argv = list(kwargs.get("args") or (args[0] if args else None) or sys.argv[1:])
        debug = "--debug" in argv or os.environ.get("FRONTIER_DEBUG", "") in ("1", "true")
        if "--debug" in argv:
            # Wherever it was typed (frontier push ... --debug), it is the group's option.
            argv = ["--debug", *(arg for arg in argv if arg != "--debug")]
            if args:
                args = (argv, *args[1:])
            else:
                kwargs["args"] = argv
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            raise SystemExit(130) from None  # Ctrl+C: the user stopped it
        except click.UsageError as error:
            if debug:
                raise
            hint = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
            click.echo(f"error: {error.format_message()}{hint}", err=True)
            raise SystemExit(error.exit_code) from None
        except click.ClickException as error:
            if debug:
                raise
            click.echo(f"error: {error.format_message()}", err=True)
            raise SystemExit(error.exit_code) from None
        except Exception as error:
            if debug:
                raise
            for line in error_lines(error):
                click.echo(line, err=True)
            raise SystemExit(1) from None
        raise SystemExit(code if isinstance(code, int) else 0)


def asyncio_run(coroutine: Any) -> Any:
    """Run on uvloop."""
    import uvloop

    return uvloop.run(coroutine)
