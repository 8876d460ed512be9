"""The ``frontier`` command: serve, submit, push, watch, tail, why (and the progress-core demo).

Every client command talks to a server at ``--url`` (default ``$FRONTIER_URL`` or
``http://127.0.0.1:8080``) with ``--token`` (default ``$FRONTIER_TOKEN``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import ssl
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import yaml

from api.client import AsyncClient, FrontierConnectionError, FrontierError

DEMO_GRAPH: dict[str, Any] = {
    "name": "word lengths",
    "nodes": {
        "words": {"op": "input"},
        "lengths": {"op": "map", "expr": "size(r)"},
        "histogram": {"op": "count_by", "key": "r"},
        "counts": {"op": "output"},
    },
    "edges": [["words", "lengths"], ["lengths", "histogram"], ["histogram", "counts"]],
}
"""The dataflow ``frontier serve --demo`` creates: counts of word lengths per time."""


def _url(url: str | None) -> str:
    return url or os.environ.get("FRONTIER_URL", "http://127.0.0.1:8080")


def _token(token: str | None) -> str | None:
    return token or os.environ.get("FRONTIER_TOKEN") or None


def _load(path: str) -> Any:
    text = Path(path).read_text() if path != "-" else sys.stdin.read()
    if path.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return yaml.safe_load(text)


def _fail(error: FrontierError | FrontierConnectionError) -> None:
    if isinstance(error, FrontierConnectionError):
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1)
    click.echo(f"error {error.status}: {error.problem.get('detail')}", err=True)
    for problem in error.problem.get("problems") or []:
        click.echo(f"  {problem.get('pointer') or '/'}: {problem.get('detail')}", err=True)
    raise SystemExit(1)


url_option = click.option("--url", help="The server (default $FRONTIER_URL or local 8080).")
token_option = click.option("--token", help="A bearer token (default $FRONTIER_TOKEN).")


@click.group()
def main() -> None:
    """Frontier: timely dataflow as a service."""


@main.command()
@click.option("--host", default=lambda: os.environ.get("FRONTIER_HOST", "127.0.0.1"))
@click.option("--port", type=int, default=lambda: int(os.environ.get("FRONTIER_PORT", "8080")))
@click.option("--workers", type=int, default=lambda: int(os.environ.get("FRONTIER_WORKERS", "1")))
@click.option(
    "--data-dir",
    default=lambda: os.environ.get("FRONTIER_DATA_DIR", ".frontier"),
    help="Where the catalogue and the inputs' logs live (default .frontier).",
)
@click.option(
    "--durability",
    type=click.Choice(["fsync", "group", "none"]),
    default=lambda: os.environ.get("FRONTIER_DURABILITY", "fsync"),
    help="Acknowledge after the disk has the data (fsync, the default), after the OS has "
    "it with a sync within 10 ms (group), or never sync (none): see docs/durability.md.",
)
@click.option(
    "--tls-cert",
    default=lambda: os.environ.get("FRONTIER_TLS_CERT"),
    help="A PEM certificate (chain): serve HTTPS and WSS, with --tls-key.",
)
@click.option(
    "--tls-key",
    default=lambda: os.environ.get("FRONTIER_TLS_KEY"),
    help="The PEM private key of --tls-cert.",
)
@click.option("--config", "config_file", help="A YAML/JSON file of settings and limits.")
@click.option(
    "--token",
    "tokens",
    multiple=True,
    help="TOKEN=TENANT (repeatable; also $FRONTIER_TOKENS, comma-separated).",
)
@click.option(
    "--operator-module",
    "operator_modules",
    multiple=True,
    help="A Python module of the deployer's own operators (repeatable).",
)
@click.option(
    "--log-format",
    type=click.Choice(["json", "text"]),
    default=lambda: os.environ.get("FRONTIER_LOG_FORMAT", "json"),
    help="Structured JSON lines (default) or plain text.",
)
@click.option(
    "--access-log",
    type=click.Choice(["all", "control", "off"]),
    default=lambda: os.environ.get("FRONTIER_ACCESS_LOG", "control"),
    help="Log every request, control-plane requests and errors (default), or none.",
)
@click.option("--demo", is_flag=True, help="Create a demo dataflow at startup.")
@click.option(
    "--processes",
    type=int,
    default=lambda: int(os.environ.get("FRONTIER_PROCESSES", "1")),
    help="How many processes the cluster has (default 1: this one alone, no sockets).",
)
@click.option(
    "--process",
    type=int,
    default=lambda: _env_int("FRONTIER_PROCESS"),
    help="This process's index in [0, processes) (default $FRONTIER_PROCESS, or the number "
    "ending the host name, as a StatefulSet's pod frontier-2 has).",
)
@click.option(
    "--peers",
    default=lambda: os.environ.get("FRONTIER_PEERS"),
    help="Every process's fabric address, host:port,... in index order.",
)
@click.option(
    "--apis",
    default=lambda: os.environ.get("FRONTIER_APIS"),
    help="Every process's API address, host:port,... in index order (default: each peer's "
    "host with this process's --port).",
)
@click.option(
    "--cluster-secret-file",
    default=lambda: os.environ.get("FRONTIER_CLUSTER_SECRET_FILE"),
    help="A file holding the secret every process of the cluster shares (or "
    "$FRONTIER_CLUSTER_SECRET).",
)
def serve(
    host: str,
    port: int,
    workers: int,
    data_dir: str,
    durability: str,
    tls_cert: str | None,
    tls_key: str | None,
    config_file: str | None,
    tokens: tuple[str, ...],
    operator_modules: tuple[str, ...],
    log_format: str,
    access_log: str,
    demo: bool,
    processes: int,
    process: int | None,
    peers: str | None,
    apis: str | None,
    cluster_secret_file: str | None,
) -> None:
    """Start the server (one process of a cluster with --processes)."""
    from api.server.logs import configure_logging
    from service.app import Limits, Settings
    from service.app.settings import LOG_SEGMENT_BYTES

    configure_logging(log_format)
    config: dict[str, Any] = _load(config_file) if config_file else {}
    pairs = list(tokens) + [t for t in os.environ.get("FRONTIER_TOKENS", "").split(",") if t]
    token_map = dict(config.get("tokens", {}))
    for pair in pairs:
        token, _, tenant = pair.partition("=")
        token_map[token] = tenant or "default"
    context = click.get_current_context()

    def chosen(name: str, variable: str, value: Any) -> Any:
        # A flag beats the environment, which beats the config file, which beats the default.
        source = context.get_parameter_source(name)
        if source is click.core.ParameterSource.COMMANDLINE or variable in os.environ:
            return value
        return config.get(name, value)

    settings = Settings(
        host=chosen("host", "FRONTIER_HOST", host),
        port=int(chosen("port", "FRONTIER_PORT", port)),
        workers=int(chosen("workers", "FRONTIER_WORKERS", workers)),
        data_dir=chosen("data_dir", "FRONTIER_DATA_DIR", data_dir),
        durability=_durability(chosen("durability", "FRONTIER_DURABILITY", durability)),
        log_segment_bytes=int(config.get("log_segment_bytes", LOG_SEGMENT_BYTES)),
        tls_cert=chosen("tls_cert", "FRONTIER_TLS_CERT", tls_cert),
        tls_key=chosen("tls_key", "FRONTIER_TLS_KEY", tls_key),
        tokens=token_map,
        limits=Limits(**config.get("limits", {})),
        operator_modules=tuple(config.get("operator_modules", ())) + operator_modules,
        cluster=_cluster(
            int(chosen("processes", "FRONTIER_PROCESSES", processes)),
            chosen("process", "FRONTIER_PROCESS", process),
            chosen("peers", "FRONTIER_PEERS", peers),
            chosen("apis", "FRONTIER_APIS", apis),
            cluster_secret_file,
            int(chosen("port", "FRONTIER_PORT", port)),
            float(config.get("startup_timeout_seconds", 60.0)),
        ),
    )
    from api.server.records import DEPTH_HEADROOM, MOST_RECORD_DEPTH, ORJSON_DEPTH

    if not 1 <= settings.limits.max_record_depth <= MOST_RECORD_DEPTH:
        raise click.BadParameter(
            f"max_record_depth must be in [1, {MOST_RECORD_DEPTH}], not "
            f"{settings.limits.max_record_depth}: answers wrap a record in up to "
            f"{DEPTH_HEADROOM} levels, and orjson encodes at most {ORJSON_DEPTH}",
            param_hint="limits",
        )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise click.BadParameter("give both --tls-cert and --tls-key, or neither")
    from service.app import ClusterError, StoreError

    try:
        code = asyncio_run(_serve(settings, demo, access_log))
    except ClusterError as error:
        # A peer that is not there, or whose hello does not match: the error names it.
        click.echo(f"frontier: cannot start: {error}", err=True)
        raise SystemExit(2) from None
    except StoreError as error:
        # Refuse to start, touching nothing: the operator decides what to do with the files.
        click.echo(f"frontier: cannot start: {error}", err=True)
        raise SystemExit(2) from None
    if code:
        raise SystemExit(code)


def _env_int(variable: str) -> int | None:
    value = os.environ.get(variable)
    return None if value is None else int(value)


def _addresses(text: str | list[str], what: str) -> list[tuple[str, int]]:
    items = text.split(",") if isinstance(text, str) else list(text)
    addresses = []
    for item in (i.strip() for i in items if i.strip()):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{item!r} is not host:port", param_hint=what)
        addresses.append((host, int(port)))
    return addresses


def _cluster(
    processes: int,
    process: int | None,
    peers: str | list[str] | None,
    apis: str | list[str] | None,
    secret_file: str | None,
    port: int,
    startup_timeout: float,
) -> Any:
    """The cluster settings (``None`` for one process), checked: each mistake names its flag."""
    from service.app import Cluster

    if processes < 1:
        raise click.BadParameter(f"must be at least 1, not {processes}", param_hint="--processes")
    if processes == 1:
        return None
    if process is None:
        # A StatefulSet's pods are named <set>-<ordinal>: the ordinal is the index.
        ordinal = os.environ.get("HOSTNAME", "").rpartition("-")[2]
        if not ordinal.isdigit():
            raise click.BadParameter(
                "give the process's index (or $FRONTIER_PROCESS, or a host name ending in "
                "-<index>)",
                param_hint="--process",
            )
        process = int(ordinal)
    if not 0 <= process < processes:
        raise click.BadParameter(f"{process} is not in [0, {processes})", param_hint="--process")
    fabric = _addresses(peers or "", "--peers")
    if len(fabric) != processes:
        raise click.BadParameter(
            f"{len(fabric)} addresses for {processes} processes", param_hint="--peers"
        )
    api = _addresses(apis, "--apis") if apis else [(host, port) for host, _ in fabric]
    if len(api) != processes:
        raise click.BadParameter(
            f"{len(api)} addresses for {processes} processes", param_hint="--apis"
        )
    secret = os.environ.get("FRONTIER_CLUSTER_SECRET", "").encode()
    if secret_file:
        with open(secret_file, "rb") as file:
            secret = file.read().strip()
    if not secret:
        raise click.BadParameter(
            "a cluster needs a shared secret: $FRONTIER_CLUSTER_SECRET or a file",
            param_hint="--cluster-secret-file",
        )
    return Cluster(
        processes,
        process,
        tuple(fabric),
        tuple(f"{host}:{p}" for host, p in api),
        secret,
        startup_timeout,
    )


def _tls(settings: Any) -> ssl.SSLContext | None:
    """The server's TLS context (``None``: plain HTTP, behind a proxy that does TLS)."""
    if settings.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls_cert, settings.tls_key)
    return context


def _durability(value: str) -> str:
    if value not in ("fsync", "group", "none"):
        raise click.BadParameter(
            f"durability must be fsync, group or none, not {value!r}", param_hint="durability"
        )
    return value


GC_GEN0_THRESHOLD = 50_000
"""Allocations between the server's young-generation collections (a pause of about 1 ms)."""


def asyncio_run(coroutine: Any) -> Any:
    """Run on uvloop."""
    import uvloop

    return uvloop.run(coroutine)


async def _serve(settings: Any, demo: bool, access_log: str = "control") -> int:
    """Serve until SIGINT/SIGTERM (0), or until the data directory fails (1: fail-stop)."""
    from aiohttp import web

    from api.server import create_app
    from api.server.app import MANAGER

    app = create_app(settings)
    # Handle SIGINT/SIGTERM before the server can answer /readyz: a supervisor that stops
    # the server as soon as it is ready must get a graceful shutdown.
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    from api.server.connections import CONNECTIONS, Connections, GuardedSite
    from api.server.logs import access_logger_class

    limits = settings.limits
    connections = Connections(limits.max_connections, limits.header_timeout_seconds)
    app[CONNECTIONS] = connections
    runner = web.AppRunner(
        app,
        shutdown_timeout=10.0,
        access_log_class=access_logger_class(access_log),
        keepalive_timeout=limits.idle_timeout_seconds,
    )
    await runner.setup()
    site = GuardedSite(runner, settings.host, settings.port, connections, _tls(settings))
    await site.start()
    # Every batch allocates thousands of short-lived containers (parsed records, batches);
    # at the default gen-0 threshold (700) the cyclic collector runs every few hundred
    # records and walks them, about a fifth of the server's time when ingesting. What
    # startup built lives as long as the server: it is frozen out of the collections.
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 20)
    base = f"{'https' if settings.tls_cert else 'http'}://{settings.host}:{settings.port}"
    click.echo(f"Frontier is serving on {base} with {settings.workers} worker(s)")
    manager = app[MANAGER]
    if demo:
        tenant = next(iter(settings.tokens.values()), "default")
        while not manager.ready and manager.failure is None:
            await asyncio.sleep(0.05)  # the data directory may hold a demo dataflow already
        record = next((r for r in manager.listing(tenant) if r.name == "demo"), None)
        if record is None:
            record = await manager.create(tenant, DEMO_GRAPH, "demo")
        path = f"/v1/dataflows/{record.id}"
        json = "-H 'Content-Type: application/json'"
        click.echo(
            "\nA demo dataflow counts word lengths per time. Try, in another terminal:\n"
            f"  session=$(curl -s -XPOST {base}{path}/inputs/words/sessions {json} -d '{{}}' "
            "| python3 -c 'import json,sys; print(json.load(sys.stdin)[\"session\"])')\n"
            f"  curl -s -XPOST {base}{path}/inputs/words/sessions/$session/push {json} "
            '-d \'{"seq": 1, "records": [[0, "timely"], [0, "data"], [1, "flow"]]}\'\n'
            f"  curl -s -XPOST {base}{path}/inputs/words/sessions/$session/advance {json} "
            "-d '{\"time\": 2}'\n"
            f"  curl -s '{base}{path}/outputs/counts/times'\n"
            f"  frontier watch {record.id}     # live frontiers\n"
            f"  frontier tail {record.id} counts\n"
            f"or open {base}/ui/#{record.id} in a browser (the live page).\n"
        )
    fatal = manager.fatal
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(manager.left.wait())]
    if fatal is not None:
        waits.append(asyncio.ensure_future(fatal.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        failed = fatal is not None and fatal.is_set()
        if failed:
            click.echo(f"frontier: stopping: {manager.failure}", err=True)
        elif manager.left.is_set():
            click.echo(f"frontier: stopping: {manager.left_by} left the cluster", err=True)
        click.echo("shutting down: closing sockets, draining, stopping workers")
        await runner.cleanup()
    return 1 if failed else 0


@main.command()
@click.argument("graph_file")
@click.option("--name", help="A name for the dataflow.")
@click.option("--dry-run", is_flag=True, help="Only validate and print the compiled plan.")
@url_option
@token_option
def submit(
    graph_file: str, name: str | None, dry_run: bool, url: str | None, token: str | None
) -> None:
    """Submit a graph (YAML or JSON file, or - for standard input)."""
    graph = _load(graph_file)

    async def go() -> Any:
        async with AsyncClient(_url(url), _token(token)) as client:
            if dry_run:
                return await client.plan(graph)
            return await client.create_dataflow(graph, name)

    try:
        result = asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        _fail(error)
    click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


@main.command()
@click.argument("dataflow")
@click.argument("input_name")
@click.argument("records_file")
@click.option("--batch", type=int, default=1000, help="Records per request.")
@click.option("--close", "close_session", is_flag=True, help="Close the session at the end.")
@url_option
@token_option
def push(
    dataflow: str,
    input_name: str,
    records_file: str,
    batch: int,
    close_session: bool,
    url: str | None,
    token: str | None,
) -> None:
    """Push a file of JSON lines ``[time, record]`` into an input, with a progress bar.

    Times must not decrease through the file; the session advances past each time once the
    file moves beyond it.
    """
    from rich.progress import Progress

    lines = (
        Path(records_file).read_text().splitlines()
        if records_file != "-"
        else sys.stdin.read().splitlines()
    )
    records = [orjson.loads(line) for line in lines if line.strip()]

    async def go() -> None:
        async with AsyncClient(_url(url), _token(token)) as client:
            session = await client.session(dataflow, input_name)
            with Progress() as progress:
                task = progress.add_task("pushing", total=len(records))
                for start in range(0, len(records), batch):
                    chunk = records[start : start + batch]
                    await session.push(chunk)
                    least = chunk[0][0]
                    if (
                        isinstance(least, int)
                        and isinstance(session.time, int)
                        and least > session.time
                    ):
                        await session.advance(least)
                    progress.advance(task, len(chunk))
            if close_session:
                await session.close()

    try:
        asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        _fail(error)


@main.command()
@click.argument("dataflow")
@click.option("--operators", is_flag=True, help="Every operator's frontier too.")
@url_option
@token_option
def watch(dataflow: str, operators: bool, url: str | None, token: str | None) -> None:
    """Show a dataflow's frontiers live."""
    from rich.live import Live
    from rich.table import Table

    state: dict[str, Any] = {}

    def render() -> Table:
        table = Table(title=f"frontiers of {dataflow}")
        table.add_column("location")
        table.add_column("frontier")
        for location, frontier in state.items():
            table.add_row(location, json.dumps(frontier) if frontier else "[] (complete)")
        return table

    async def plain() -> None:
        # Not a terminal: one flushed line per change, for pipes and scripts.
        async with AsyncClient(_url(url), _token(token)) as client:
            async for event in client.frontiers(dataflow, operators):
                if event.get("type") == "frontier":
                    click.echo(f"{event['location']} {json.dumps(event['frontier'])}")
                elif event.get("type") == "closed":
                    click.echo(f"closed: {event.get('reason')}")
                sys.stdout.flush()

    async def go() -> None:
        async with AsyncClient(_url(url), _token(token)) as client:
            with Live(render(), refresh_per_second=8) as live:
                async for event in client.frontiers(dataflow, operators):
                    if event.get("type") == "frontier":
                        state[event["location"]] = event["frontier"]
                        live.update(render())
                    elif event.get("type") == "closed":
                        click.echo(f"closed: {event.get('reason')}")

    try:
        asyncio_run(go() if sys.stdout.isatty() else plain())
    except (FrontierError, FrontierConnectionError) as error:
        _fail(error)


@main.command()
@click.argument("dataflow")
@click.argument("output")
@click.option("--from", "start", help="Resume from this time (JSON).")
@url_option
@token_option
def tail(dataflow: str, output: str, start: str | None, url: str | None, token: str | None) -> None:
    """Print an output's records as they arrive, one JSON line per batch."""
    begin = None if start is None else orjson.loads(start)

    async def go() -> None:
        async with AsyncClient(_url(url), _token(token)) as client:
            async for event in client.events(dataflow, output, begin):
                # One line per event, flushed: readers of a pipe see events as they come.
                click.echo(orjson.dumps(event).decode())
                sys.stdout.flush()

    try:
        asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        _fail(error)


def _time_text(time: Any) -> str:
    return orjson.dumps(time).decode()


def _holder_label(holder: dict[str, Any]) -> str:
    """One line for a holder: what it is, where, when, how many, and how it gets there."""
    kind = holder["kind"]
    where = holder.get("port") or holder.get("operator") or "?"
    if kind == "records":
        edge = holder.get("edge") or [None, None]
        where = f"on {edge[0] or '?'} -> {edge[1] or '?'}"
        what = f"{holder['count']} records"
    elif kind == "session":
        what = f"session {holder['session']} of {holder['operator']}"
        where = ""
    elif kind == "transaction":
        what = f"transaction {holder['transaction']} ({holder['count']} staged)"
        where = ""
    elif kind == "scope":
        what = f"scope {holder['operator']}"
        where = f"at {holder['port']}" if holder.get("port") else ""
    elif kind == "outside":
        what = f"outside scope {holder['operator']}"
        where = ""
    else:
        what = f"{holder['count']} capabilities" if holder["count"] != 1 else "capability"
        where = f"of {holder['operator']}" + (f" at {holder['port']}" if holder["port"] else "")
    route = " > ".join(holder.get("path") or [])
    parts = [what, where, f"@ {_time_text(holder['time'])}", f"summary {holder['summary']}"]
    if route:
        parts.append(f"via {route}")
    return "  ".join(part for part in parts if part)


def why_tree(answer: dict[str, Any]) -> Any:
    """The explain answer as a rich Tree: each holder, and what is behind it beneath.

    >>> from rich.console import Console
    >>> console = Console(width=100, color_system=None)
    >>> answer = {"location": "out", "time": 1, "complete": True, "frontier": [2], "holders": []}
    >>> console.print(why_tree(answer))
    1 is complete at out (frontier [2])
    """
    from rich.markup import escape
    from rich.tree import Tree

    time = _time_text(answer["time"])
    frontier = _time_text(answer["frontier"])
    if answer["complete"]:
        return Tree(escape(f"{time} is complete at {answer['location']} (frontier {frontier})"))
    tree = Tree(escape(f"{time} is not complete at {answer['location']} (frontier {frontier})"))

    def add(branch: Any, holders: list[dict[str, Any]]) -> None:
        for holder in holders:
            add(branch.add(escape(_holder_label(holder))), holder.get("holders") or [])

    add(tree, answer["holders"])
    return tree


@main.command()
@click.argument("dataflow")
@click.argument("location")
@click.argument("time")
@url_option
@token_option
def why(dataflow: str, location: str, time: str, url: str | None, token: str | None) -> None:
    """Why TIME is not complete at LOCATION: everything holding it back, as a tree.

    LOCATION is an output's name or a node's output port (node:port); TIME is JSON (3, or
    [1,0] for product times).
    """
    from rich.console import Console

    try:
        parsed: Any = orjson.loads(time)
    except orjson.JSONDecodeError:
        parsed = time  # the server says which time domain it expects

    async def go() -> Any:
        async with AsyncClient(_url(url), _token(token)) as client:
            return await client.explain(dataflow, location, parsed)

    try:
        answer = asyncio_run(go())
    except (FrontierError, FrontierConnectionError) as error:
        _fail(error)
    Console().print(why_tree(answer))


@main.command()
def demo() -> None:
    """The progress-core demo: frontiers moving around a loop, no server."""
    from service.demo import main as demo_main

    demo_main()
