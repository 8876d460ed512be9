"""``frontier serve``: the settings from flags, environment and config file, and the server.

Each setting comes from its flag, else its ``FRONTIER_*`` variable, else the ``--config``
file, else its default (:func:`_settings`); a mistake is refused before anything starts,
naming the flag or setting to change. :func:`_serve` then runs the server on uvloop until a
signal, the cluster's end or a failure of the data directory.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import ssl
from typing import TYPE_CHECKING, Any

import click

from api.cli.clustering import addresses
from api.cli.common import asyncio_run, load_document

if TYPE_CHECKING:
    from aiohttp import web

    from service.app import Cluster, DataflowManager, Settings

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

GC_GEN0_THRESHOLD = 50_000
"""Allocations between the server's young-generation collections (a pause of about 1 ms)."""


@click.command()
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
@click.option(
    "--allow-anonymous",
    is_flag=True,
    default=lambda: os.environ.get("FRONTIER_ALLOW_ANONYMOUS", "").lower() in ("1", "true"),
    help="Serve without tokens beyond loopback: anyone who reaches the server has full "
    "access (also $FRONTIER_ALLOW_ANONYMOUS=1, or allow_anonymous: true in --config).",
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
    "--rescale",
    is_flag=True,
    default=lambda: os.environ.get("FRONTIER_RESCALE", "").lower() in ("1", "true"),
    help="Start on a data directory written by a cluster of another shape (other "
    "--processes or --workers), rebuilding its dataflows on this one (also "
    '$FRONTIER_RESCALE=1, or rescale: true in --config): docs/cluster.md, "Changing the '
    'shape". Without it such a start is refused (exit 2).',
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
    allow_anonymous: bool,
    demo: bool,
    processes: int,
    process: int | None,
    peers: str | None,
    apis: str | None,
    rescale: bool,
    cluster_secret_file: str | None,
) -> None:
    """Start the server (one process of a cluster with --processes)."""
    from api.server.logs import configure_logging

    configure_logging(log_format)
    config: dict[str, Any] = load_document(config_file) if config_file else {}
    # The parameters reach _settings through the context, which also says where each came from.
    settings = _settings(click.get_current_context(), config)
    _check(settings)
    if not settings.tokens and not loopback(settings.host):
        logging.getLogger("frontier.server").warning(
            "anonymous access: %s:%d has no tokens, so anyone who reaches it can create, push "
            "and drop dataflows (allow_anonymous)",
            settings.host,
            settings.port,
        )
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


def _settings(context: click.Context, config: dict[str, Any]) -> Settings:
    """The settings of ``serve``'s parameters (in ``context``) and the config file."""
    from service.app import Limits, Settings
    from service.app.settings import LOG_SEGMENT_BYTES

    params = context.params
    token_map = _tokens(config, params["tokens"])

    def chosen(name: str, variable: str) -> Any:
        # A flag beats the environment, which beats the config file, which beats the default.
        value = params[name]
        source = context.get_parameter_source(name)
        if source is click.core.ParameterSource.COMMANDLINE or variable in os.environ:
            return value
        return config.get(name, value)

    return Settings(
        host=chosen("host", "FRONTIER_HOST"),
        port=int(chosen("port", "FRONTIER_PORT")),
        workers=int(chosen("workers", "FRONTIER_WORKERS")),
        data_dir=chosen("data_dir", "FRONTIER_DATA_DIR"),
        durability=_durability(chosen("durability", "FRONTIER_DURABILITY")),
        log_segment_bytes=int(config.get("log_segment_bytes", LOG_SEGMENT_BYTES)),
        tls_cert=chosen("tls_cert", "FRONTIER_TLS_CERT"),
        tls_key=chosen("tls_key", "FRONTIER_TLS_KEY"),
        tokens=token_map,
        allow_anonymous=bool(chosen("allow_anonymous", "FRONTIER_ALLOW_ANONYMOUS")),
        rescale=bool(chosen("rescale", "FRONTIER_RESCALE")),
        allowed_hosts=tuple(config.get("allowed_hosts", ())),
        limits=Limits(**config.get("limits", {})),
        operator_modules=tuple(config.get("operator_modules", ())) + params["operator_modules"],
        cluster=_cluster(
            int(chosen("processes", "FRONTIER_PROCESSES")),
            chosen("process", "FRONTIER_PROCESS"),
            chosen("peers", "FRONTIER_PEERS"),
            chosen("apis", "FRONTIER_APIS"),
            params["cluster_secret_file"],
            int(chosen("port", "FRONTIER_PORT")),
            float(config.get("startup_timeout_seconds", 60.0)),
        ),
    )


def _tokens(config: dict[str, Any], tokens: tuple[str, ...]) -> dict[str, str]:
    """Token to tenant: the config file's, then ``--token`` and ``$FRONTIER_TOKENS`` pairs."""
    pairs = list(tokens) + [t for t in os.environ.get("FRONTIER_TOKENS", "").split(",") if t]
    token_map = dict(config.get("tokens", {}))
    for pair in pairs:
        token, _, tenant = pair.partition("=")
        token_map[token] = tenant or "default"
    return token_map


def _check(settings: Settings) -> None:
    """Refuse settings the server cannot run with, naming the setting to change."""
    from api.server.records import DEPTH_HEADROOM, MOST_RECORD_DEPTH, ORJSON_DEPTH

    if not 1 <= settings.limits.max_record_depth <= MOST_RECORD_DEPTH:
        raise click.BadParameter(
            f"max_record_depth must be in [1, {MOST_RECORD_DEPTH}], not "
            f"{settings.limits.max_record_depth}: answers wrap a record in up to "
            f"{DEPTH_HEADROOM} levels, and orjson encodes at most {ORJSON_DEPTH}",
            param_hint="limits",
        )
    if settings.workers < 1:
        raise click.BadParameter(
            f"must be at least 1, not {settings.workers}", param_hint="--workers"
        )
    if not 0 <= settings.port < 65536:
        raise click.BadParameter(f"{settings.port} is not a port (0 to 65535)", param_hint="--port")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise click.BadParameter("give both --tls-cert and --tls-key, or neither")
    for flag, path in (("--tls-cert", settings.tls_cert), ("--tls-key", settings.tls_key)):
        if path is not None and not os.access(path, os.R_OK):
            raise click.BadParameter(f"cannot read {path}", param_hint=flag)
    if not settings.tokens and not settings.allow_anonymous and not loopback(settings.host):
        raise click.UsageError(
            f"listening on {settings.host} with no token would give anyone who reaches it "
            "full access (create, push, drop): give tokens (--token TOKEN=TENANT, "
            "$FRONTIER_TOKENS, or tokens: in --config), or allow anonymous access explicitly "
            "(--allow-anonymous)"
        )


def loopback(host: str) -> bool:
    """Whether ``host`` is reached from this machine only (a loopback address or name).

    >>> loopback("127.0.0.1"), loopback("::1"), loopback("localhost"), loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, it may be reached from outside


def _env_int(variable: str) -> int | None:
    value = os.environ.get(variable)
    return None if value is None else int(value)


def _cluster(
    processes: int,
    process: int | None,
    peers: str | list[str] | None,
    apis: str | list[str] | None,
    secret_file: str | None,
    port: int,
    startup_timeout: float,
) -> Cluster | None:
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
    fabric = addresses(peers or "", "--peers")
    if len(fabric) != processes:
        raise click.BadParameter(
            f"{len(fabric)} addresses for {processes} processes", param_hint="--peers"
        )
    api = addresses(apis, "--apis") if apis else [(host, port) for host, _ in fabric]
    if len(api) != processes:
        raise click.BadParameter(
            f"{len(api)} addresses for {processes} processes", param_hint="--apis"
        )
    secret = os.environ.get("FRONTIER_CLUSTER_SECRET", "").encode()
    if secret_file:
        try:
            with open(secret_file, "rb") as file:
                secret = file.read().strip()
        except OSError as error:
            raise click.BadParameter(
                f"cannot read {secret_file}: {error.strerror}", param_hint="--cluster-secret-file"
            ) from None
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


def _tls(settings: Settings) -> ssl.SSLContext | None:
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


async def _serve(settings: Settings, demo: bool, access_log: str = "control") -> int:
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
    connections = Connections(
        limits.max_connections,
        limits.header_timeout_seconds,
        limits.max_connections_per_client,
    )
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
        await _demo(manager, settings, base)
    return await _until_stopped(manager, stop, runner)


async def _demo(manager: DataflowManager, settings: Settings, base: str) -> None:
    """Create the demo dataflow (unless the data directory has it) and say how to try it."""
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
        "or with the frontier command:\n"
        '  printf \'[0, "timely"]\\n[0, "data"]\\n[1, "flow"]\\n\' > words.jsonl\n'
        f"  frontier push --url {base} {record.id} words words.jsonl\n"
        f"  frontier watch --url {base} {record.id}     # live frontiers\n"
        f"  frontier tail --url {base} {record.id} counts\n"
        f"or open {base}/ui/#{record.id} in a browser (the live page).\n"
    )


async def _until_stopped(
    manager: DataflowManager, stop: asyncio.Event, runner: web.AppRunner
) -> int:
    """Wait for a signal, the cluster's end or a failure, then shut down; the exit code.

    The code is 1 when the data directory failed (fail-stop), else 0.
    """
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
