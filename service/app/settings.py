"""Service settings: where to listen, how many workers, and the limits."""

from __future__ import annotations

from dataclasses import dataclass, field

LOG_SEGMENT_BYTES = 64 * 1024 * 1024
"""The default size of an input's log segment."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Every bound the service enforces; each refusal names the limit."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_frame_bytes: int = 4 * 1024 * 1024
    max_batch_records: int = 100_000
    max_dataflows_per_tenant: int = 100
    max_subscribers_per_dataflow: int = 2_000
    max_sessions_per_input: int = 1_000
    max_staged_records_per_input: int = 1_000_000
    max_staged_bytes_per_input: int = 256 * 1024 * 1024
    """The bytes of staging requests' bodies an input's open transactions may hold (beside
    max_staged_records_per_input): staged records are bounded in memory, whatever their
    sizes."""
    output_retention_records: int = 1_000_000
    output_retention_bytes: int = 256 * 1024 * 1024
    """The encoded bytes of records an output keeps for readers, at most (beside
    output_retention_records): what retention holds is bounded in memory, whatever the
    records' sizes."""
    subscriber_queue_events: int = 1_000
    subscriber_queue_bytes: int = 64 * 1024 * 1024
    """The encoded bytes of records queued for one subscriber before it is closed as slow."""
    ws_credits: int = 16
    session_grace_seconds: float = 60.0
    """How long a producer's session outlives its WebSocket: a producer whose connection
    broke resumes it (``?session=``) within this time; after it the session is closed, as
    if the producer had closed it (0: at once)."""
    idempotency_keys_kept: int = 10_000
    staged_transaction_seconds: float = 3_600.0
    """A staged transaction neither committed nor aborted this long after its last staging
    request is discarded (durably): what a writer that died left staged stops counting
    against the staging caps; committing it is then 410 ``transaction-expired``."""
    max_record_depth: int = 64
    """How deeply a record's lists and objects may nest; a deeper record is refused where it
    arrives (deep records would make every step that walks them recurse without bound)."""
    max_record_bytes: int = 1024 * 1024
    """The largest encoded size of one record."""
    max_connections: int = 10_000
    """Open client connections the server keeps; past it, new ones are closed at once."""
    max_connections_per_client: int = 1_000
    """Open connections one client address may hold; past it, its new ones are closed at
    once (503), so that one client holding many sockets leaves room for the others and for
    health probes (behind a proxy, every client has the proxy's address: raise it)."""
    header_timeout_seconds: float = 10.0
    """How long a client may take to send a request's line and headers."""
    body_timeout_seconds: float = 60.0
    """How long a client may take to send a request's body once its headers are in."""
    idle_timeout_seconds: float = 75.0
    """How long a kept-alive HTTP connection may sit between requests."""
    tenant_requests_per_second: float = 5_000.0
    """Each tenant's sustained request rate (token bucket; 0 is unlimited); past it, 429 with
    Retry-After. An ordinary producer must get through: pushing batches of 100 over HTTP,
    one producer makes about 1,000-1,700 requests a second and four about 1,500-2,200
    (``bench/producer_rate.py``), so the default is well above that."""
    tenant_request_burst: int = 0
    """The bucket's depth: requests a tenant may send at once above the rate (0: one second's
    worth)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How the service runs."""

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    data_dir: str | None = None
    """Where the catalogue and the inputs' logs live (``frontier serve``: ``.frontier``);
    ``None`` keeps everything in memory, as a library user running a dataflow in-process
    may want."""
    log_segment_bytes: int = LOG_SEGMENT_BYTES
    """How large an input's log segment grows before the next one starts: the unit in which
    logs are truncated."""
    tls_cert: str | None = None
    """A PEM certificate (chain): the server speaks HTTPS and WSS (with ``tls_key``)."""
    tls_key: str | None = None
    durability: str = "fsync"
    """When an acknowledged operation is durable: ``fsync``, ``group`` or ``none``
    (``docs/durability.md``)."""
    tokens: dict[str, str] = field(default_factory=dict)
    """Bearer token -> tenant. Empty means no authentication (every request is tenant
    ``default``): allowed beyond loopback only with ``allow_anonymous``."""
    allow_anonymous: bool = False
    """Serve without tokens on an address beyond loopback (anyone who reaches it has full
    access): said explicitly, and warned about at every start."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names a server without tokens answers besides its listen address and loopback
    names (its ``Host`` header is checked: a page elsewhere cannot rebind DNS to it)."""
    limits: Limits = field(default_factory=Limits)
    operator_modules: tuple[str, ...] = ()
    """Python modules with operators of the deployer's own: each defines
    ``register_operators(register)``. Modules named by the ``frontier.operators`` entry
    points are loaded too."""
    cluster: Cluster | None = None
    """The cluster this process is one of (``docs/cluster.md``); ``None``: one process, which
    opens no sockets but its API's."""
    rescale: bool = False
    """Start on a data directory written by a cluster of another shape (other processes or
    workers per process): its dataflows are rebuilt on this one (``docs/cluster.md``,
    "Changing the shape"). Without it such a start is refused."""

    @property
    def processes(self) -> int:
        """How many processes the cluster has (1 alone)."""
        return 1 if self.cluster is None else self.cluster.processes

    @property
    def process(self) -> int:
        """This process's index in its cluster (0 alone)."""
        return 0 if self.cluster is None else self.cluster.process


@dataclass(frozen=True, slots=True)
class Cluster:
    """Where one process stands in a cluster of ``processes`` processes.

    ``peers`` is every process's fabric address (``host``, ``port``), in index order: this
    process listens on its own. ``apis`` is every process's API address (``host:port``), in
    the same order: a request for an input another process holds is forwarded there.
    """

    processes: int
    process: int
    peers: tuple[tuple[str, int], ...]
    apis: tuple[str, ...]
    secret: bytes
    startup_timeout: float = 60.0
