"""Processes of one cluster: the fabric between ``N`` processes of ``W`` workers each, over TCP.

Timely dataflow runs ``-n`` processes of ``-w`` workers: every process builds every
dataflow, so worker ``p * W + w`` (process ``p``, local worker ``w``) is one of ``N * W``
peers, records cross processes on exchange channels, and progress is broadcast to every
worker. :class:`ClusterFabric` is a :class:`~operators.runtime.fabric.Fabric` for that shape:
the mailboxes of local workers are the in-process ones; a push to a remote worker's mailbox
(or a broadcast to a remote process's workers) is appended to the :class:`Link` to that
process, and the link writes what was appended during one turn of the event loop as one
frame, after the workers' current steps (timely's buffering: small messages are batched).

**Links.** One TCP connection per pair of processes (asyncio streams on the running loop,
uvloop in the server). Process ``i`` connects to every ``j < i`` and accepts every ``j > i``,
retrying until ``startup_timeout``. Each side first sends a hello (the protocol version, the
cluster's size, its index, its workers, and an HMAC of those under the shared secret): any
mismatch ends start-up with :class:`ClusterError` naming the peer and the field. Frames are
length-prefixed; one connection per pair keeps each sender's messages in FIFO order, which
the progress protocol needs.

**Codec** (:mod:`operators.runtime.wire`). A batch of columns travels as Arrow IPC (its
schema once per connection, then one record batch message per batch, read in place on
arrival); everything else as the pickle (protocol 5) of a list of ``(channel, worker,
message)``: records, times (``Product`` included) and progress batches round-trip exactly,
with no conversion per record (``docs/cluster.md`` gives the figures beside orjson and
msgpack). Only a peer that proved it holds the secret is read from.

**Backpressure.** A link's send buffer is bounded (``SEND_BUFFER``): past it, a worker's
next step waits until the socket drains (:meth:`ClusterFabric.ready`).

**Failure is fail-stop.** A connection that breaks without its peer's goodbye (a crash, a
kill, a network partition) fails the fabric: :meth:`ClusterFabric.failed` raises
:class:`PeerLost` naming the peer, and ``execute`` ends with it. Nothing is retried: the
dataflows' state would diverge, so the process must stop (the durable store recovers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from operators.runtime.fabric import Fabric, Mailbox
from operators.runtime.framing import CorruptFrame, FrameReader
from operators.runtime.wire import Decoder, Encoder

log = logging.getLogger("frontier.cluster")

PROTOCOL = 2
"""The version of the hello and the frames; peers must agree (2: batches of columns as
Arrow IPC frames)."""

MAGIC = b"FRONTIER"
HEADER = struct.Struct("<I")
"""A frame's length (the payload follows)."""
MOST_FRAME = 1 << 30
"""A frame longer than this is a corrupt stream, not a message."""
MOST_HELLO = 4096
"""The longest hello read from a connection that has not proved it is a peer."""
HELLO_SECONDS = 10.0
"""How long a connection to the fabric port may take to send its whole hello."""
SEND_BUFFER = 8 * 1024 * 1024
"""Bytes a link may hold unsent before the workers' next step waits for the socket."""
ALL_LOCAL = -1
"""The worker of a message for every local worker of the receiving process (a broadcast)."""
_BYE = b""
"""An empty frame: the sender is done and closes the connection on purpose."""
_FAILED = b"F"
"""A last frame's prefix: the sender stops because it failed; the cause (UTF-8) follows.
No other frame begins so (:mod:`operators.runtime.wire`)."""


class ClusterError(Exception):
    """The cluster could not be formed (a peer unreachable, a hello that does not match)."""


class NotAPeer(ClusterError):
    """A connection to the fabric port that is no peer of this cluster's.

    Not a hello, a hello too long or too slow, or one whose HMAC the shared secret does not
    give: only that connection is closed (and the refusal logged), start-up goes on. Only a
    peer that proves it holds the secret can end start-up, by a hello that does not match.
    """


class PeerLost(ClusterError):
    """A peer's connection broke while the dataflows ran: the process must stop."""


class PeerFailed(PeerLost):
    """A peer stopped because it failed, and said why (its cause is this error's message)."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Where this process stands in its cluster.

    ``peers`` is every process's ``(host, port)``, in index order (this process listens on
    its own entry).
    """

    processes: int
    index: int
    workers: int
    peers: tuple[tuple[str, int], ...]
    secret: bytes
    startup_timeout: float = 30.0
    bind: str | None = None
    """The address to listen on (``None``: this process's own entry in ``peers``). A pod
    listens on ``0.0.0.0`` while its peers reach it by a name that may not resolve yet."""

    def __post_init__(self) -> None:
        if self.processes < 1 or len(self.peers) != self.processes:
            raise ClusterError(
                f"{len(self.peers)} peer addresses for a cluster of {self.processes} processes"
            )
        if not 0 <= self.index < self.processes:
            raise ClusterError(f"process index {self.index} is not in [0, {self.processes})")
        if self.workers < 1:
            raise ClusterError(f"workers must be at least 1, not {self.workers}")

    def name(self, process: int) -> str:
        """``process 1 (host:port)``: how errors name a peer."""
        host, port = self.peers[process]
        return f"process {process} ({host}:{port})"


def _hello(spec: ClusterSpec) -> bytes:
    fields = {
        "protocol": PROTOCOL,
        "processes": spec.processes,
        "index": spec.index,
        "workers": spec.workers,
    }
    text = json.dumps(fields, sort_keys=True).encode()
    mac = hmac.new(spec.secret, text, hashlib.sha256).hexdigest()
    return json.dumps({**fields, "mac": mac}, sort_keys=True).encode()


def _check_hello(spec: ClusterSpec, data: bytes, expected: int | None, where: str) -> int:
    """The peer's index, if its hello matches ours; :class:`ClusterError` naming the field.

    The HMAC is checked before anything else: a hello it does not prove is
    :class:`NotAPeer`, whatever its fields say.
    """
    try:
        hello = json.loads(data)
        fields = {k: hello[k] for k in ("protocol", "processes", "index", "workers")}
        mac = str(hello["mac"])
    except (ValueError, KeyError, TypeError):
        raise NotAPeer(f"{where}: not a Frontier cluster hello") from None
    text = json.dumps(fields, sort_keys=True).encode()
    if not hmac.compare_digest(mac, hmac.new(spec.secret, text, hashlib.sha256).hexdigest()):
        raise NotAPeer(f"{where}: the cluster secret does not match")
    if fields["protocol"] != PROTOCOL:
        raise ClusterError(f"{where}: protocol version {fields['protocol']}, ours {PROTOCOL}")
    if fields["processes"] != spec.processes:
        raise ClusterError(f"{where}: cluster size {fields['processes']}, ours {spec.processes}")
    if fields["workers"] != spec.workers:
        raise ClusterError(f"{where}: {fields['workers']} workers, ours {spec.workers}")
    index = fields["index"]
    if not isinstance(index, int) or not 0 <= index < spec.processes or index == spec.index:
        raise ClusterError(f"{where}: process index {index} is not another process's")
    if expected is not None and index != expected:
        raise ClusterError(f"{where}: process index {index}, expected {expected}")
    return index


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if length > MOST_FRAME:
        raise ClusterError(f"a frame of {length} bytes: the stream is corrupt")
    return await reader.readexactly(length)


async def _read_hello(reader: asyncio.StreamReader, where: str) -> bytes:
    """A connection's magic and hello frame, bounded in size and in time (:class:`NotAPeer`)."""
    async with asyncio.timeout(HELLO_SECONDS):
        magic = await reader.readexactly(len(MAGIC))
        if magic != MAGIC:
            raise NotAPeer(f"{where}: not a Frontier cluster peer")
        (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        if length > MOST_HELLO:
            raise NotAPeer(f"{where}: a hello of {length} bytes (at most {MOST_HELLO})")
        return await reader.readexactly(length)


def _frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


class Link:
    """The connection to one peer process: messages out in batches, frames in, FIFO."""

    __slots__ = (
        "_decoder",
        "_encoder",
        "_flush_scheduled",
        "_frames",
        "_loop",
        "_outbox",
        "_writer",
        "bytes_sent",
        "frames_sent",
        "peer",
    )

    def __init__(
        self, peer: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.peer = peer
        self._writer = writer
        # Past the hello, frames are read by a protocol of their own (large ones straight
        # into their buffers); the writer is unchanged.
        self._frames = FrameReader.take_over(reader, writer.transport, MOST_FRAME)
        self._outbox: list[tuple[int, int, object]] = []
        self._flush_scheduled = False
        self._loop = asyncio.get_running_loop()
        self._encoder = Encoder()
        self._decoder = Decoder()
        self.bytes_sent = 0
        self.frames_sent = 0
        transport = writer.transport
        transport.set_write_buffer_limits(high=SEND_BUFFER)

    def send(self, channel: int, worker: int, message: object) -> None:
        """Queue ``message`` for ``worker``'s mailbox of ``channel`` on the peer."""
        self._outbox.append((channel, worker, message))
        if not self._flush_scheduled:
            # Everything queued during this turn of the loop (the workers' steps, a push
            # from a request handler) goes out as one frame.
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the queued messages: one frame of pickles, one per batch of columns."""
        self._flush_scheduled = False
        if not self._outbox or self._writer.is_closing():
            return
        outbox, self._outbox = self._outbox, []
        write = self._writer.write
        for pieces in self._encoder.payloads(outbox):
            size = sum(len(piece) for piece in pieces)
            if size > MOST_FRAME:
                raise ClusterError(f"a frame of {size} bytes (at most {MOST_FRAME})")
            write(HEADER.pack(size))
            for piece in pieces:  # as they are: an IPC body (an Arrow buffer) is not copied
                write(piece if type(piece) is bytes else memoryview(piece))
            self.bytes_sent += size + HEADER.size
            self.frames_sent += 1

    def backlogged(self) -> bool:
        """Whether more than ``SEND_BUFFER`` bytes wait to be sent."""
        return self._writer.transport.get_write_buffer_size() > SEND_BUFFER

    async def drain(self) -> None:
        """Wait until the socket has taken what was written (down to its low mark)."""
        await self._writer.drain()

    async def receive(self, deliver: Callable[[list[tuple[int, int, object]]], None]) -> None:
        """Deliver every frame until the peer's goodbye; :class:`PeerLost` if it never came."""
        while True:
            try:
                payload = await self._frames.next()
            except CorruptFrame as error:
                raise ClusterError(str(error)) from None
            except (asyncio.IncompleteReadError, ConnectionError, OSError) as error:
                cause = (
                    "the connection closed"
                    if isinstance(error, asyncio.IncompleteReadError)
                    else str(error) or type(error).__name__
                )
                raise PeerLost(cause) from None
            if payload == _BYE:
                return
            if payload.startswith(_FAILED):
                raise PeerFailed(payload[len(_FAILED) :].decode(errors="replace"))
            items = self._decoder.items(payload)  # a peer that proved it holds the secret
            if items:
                deliver(items)

    def fail(self, cause: str) -> None:
        """Send what is queued and why this process stops, then close (no goodbye)."""
        self.flush()
        if not self._writer.is_closing():
            self._writer.write(_frame(_FAILED + cause.encode()))
            self._writer.close()

    def abort(self) -> None:
        """Close at once, without a goodbye: the peer sees the connection lost."""
        self._outbox.clear()
        self._writer.transport.abort()

    async def close(self) -> None:
        """Send what is queued and a goodbye, then close."""
        self.flush()
        if not self._writer.is_closing():
            self._writer.write(_frame(_BYE))
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.drain()
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()


class _RemoteBox(Mailbox[object]):
    """A remote worker's mailbox, seen from here: a push goes over the link."""

    __slots__ = ("_channel", "_link", "_worker")

    def __init__(self, link: Link, channel: int, worker: int) -> None:
        super().__init__()
        self._link = link
        self._channel = channel
        self._worker = worker

    def push(self, message: object) -> None:
        """Send ``message`` to the remote worker."""
        self._link.send(self._channel, self._worker, message)

    def attach(self, activator: Callable[[], None]) -> None:
        """Remote workers' consumers attach on their own process, never here."""
        raise RuntimeError(f"worker {self._worker} is not in this process")


class ClusterFabric(Fabric):
    """The fabric of one process of a cluster (see the module docstring)."""

    def __init__(self, spec: ClusterSpec, links: dict[int, Link]) -> None:
        super().__init__(spec.processes * spec.workers)
        self.spec = spec
        self.links = links
        first = spec.index * spec.workers
        self.local = range(first, first + spec.workers)
        self._receivers: list[asyncio.Task[None]] = []
        self._failure: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._left: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._closing = False
        for peer, link in links.items():
            task = asyncio.ensure_future(self._receive(peer, link))
            self._receivers.append(task)

    @property
    def local_workers(self) -> int:
        """How many workers run in this process."""
        return self.spec.workers

    def _process_of(self, worker: int) -> int:
        return worker // self.spec.workers

    def mailboxes(self, channel: int) -> list[Mailbox[object]]:
        """Every worker's mailbox of ``channel``: local queues, remote senders."""
        boxes = self._mailboxes.get(channel)
        if boxes is None:
            local = self.local
            boxes = self._mailboxes[channel] = [
                Mailbox()
                if worker in local
                else _RemoteBox(self.links[self._process_of(worker)], channel, worker)
                for worker in range(self.peers)
            ]
        return boxes

    def broadcast(self, channel: int, sender: int, message: object) -> None:
        """Deliver to every local worker, and once per remote process for all of its own."""
        boxes = self.mailboxes(channel)
        item = (sender, message)
        for worker in self.local:
            boxes[worker].push(item)
        for link in self.links.values():
            link.send(channel, ALL_LOCAL, item)

    def _deliver(self, items: list[tuple[int, int, object]]) -> None:
        for channel, worker, message in items:
            if worker == ALL_LOCAL:
                boxes = self.mailboxes(channel)
                for local in self.local:
                    boxes[local].push(message)
            else:
                self.mailboxes(channel)[worker].push(message)

    async def _receive(self, peer: int, link: Link) -> None:
        try:
            await link.receive(self._deliver)
            if not self._closing and not self._left.done():
                self._left.set_result(self.spec.name(peer))
        except PeerFailed as error:
            # Its cause is ours: name the process that was lost first, not the messenger.
            if not self._closing and not self._failure.done():
                self._failure.set_exception(
                    PeerLost(f"{error} (reported by {self.spec.name(peer)})")
                )
        except PeerLost as error:
            if not self._closing and not self._failure.done():
                self._failure.set_exception(
                    PeerLost(f"{self.spec.name(peer)}: connection lost ({error})")
                )
        except Exception as error:  # a frame that does not decode: as fatal
            if not self._failure.done():
                self._failure.set_exception(
                    PeerLost(f"{self.spec.name(peer)}: unreadable frame ({error!r})")
                )

    def failed(self) -> asyncio.Future[None]:
        """Completes with :class:`PeerLost` if a peer's connection breaks (never otherwise)."""
        return self._failure

    def left(self) -> asyncio.Future[str]:
        """Completes with a peer's name when it says goodbye while this process runs on.

        A process whose workers are done may leave while others finish theirs: that is no
        failure of the fabric. A service, whose dataflows never end, stops when a peer leaves.
        """
        return self._left

    async def ready(self) -> None:
        """Wait while a link holds more than ``SEND_BUFFER`` unsent (backpressure)."""
        for link in self.links.values():
            if link.backlogged():
                await link.drain()

    def stalled(self) -> bool:
        """Whether some link is over its send buffer (the workers should wait)."""
        return any(link.backlogged() for link in self.links.values())

    async def close(self) -> None:
        """Say goodbye to every peer and close; wait for their goodbyes (or their loss)."""
        self._closing = True
        for link in self.links.values():
            await link.close()
        for task in self._receivers:
            with contextlib.suppress(asyncio.CancelledError, PeerLost, ConnectionError):
                await asyncio.wait_for(task, self.spec.startup_timeout)
        if not self._failure.done():
            self._failure.cancel()

    async def abort(self, cause: str | None = None) -> None:
        """Drop every link without a goodbye (this process failed): its peers fail too.

        Fail-stop for a process that outlives its failure (one that exits closes its
        sockets the same way): each peer's ``execute`` ends with :class:`PeerLost` naming
        this process, instead of waiting for progress that will never come. With a
        ``cause`` (a lost peer, say), each peer is told it first, and names it as its own.
        """
        self._closing = True
        for link in self.links.values():
            if cause is None:
                link.abort()
            else:
                link.fail(cause)
        for task in self._receivers:
            task.cancel()
        for task in self._receivers:
            with contextlib.suppress(asyncio.CancelledError, PeerLost, ConnectionError):
                await task
        if not self._failure.done():
            self._failure.cancel()


async def connect(
    spec: ClusterSpec,
    fabric: Callable[[ClusterSpec, dict[int, Link]], ClusterFabric] = ClusterFabric,
) -> ClusterFabric:
    """Form the cluster: listen, connect to lower indices, accept higher ones, say hello.

    Returns once this process has a checked link to every other; :class:`ClusterError`
    (naming the peer and the field) if a hello does not match or a peer is not reachable
    within ``startup_timeout``. ``fabric`` makes the fabric over the links (a test harness
    passes one that delivers progress late and interleaved).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + spec.startup_timeout
    links: dict[int, Link] = {}
    accepted: asyncio.Queue[tuple[int, Link] | BaseException] = asyncio.Queue()
    host, port = spec.peers[spec.index]
    server = await asyncio.start_server(
        _acceptor(spec, accepted), spec.bind or host, port, reuse_address=True
    )
    try:
        for peer in range(spec.index):
            links[peer] = await _dial(spec, peer, deadline)
        await _take_accepted(spec, links, accepted, deadline)
    except BaseException:
        for link in links.values():
            link.abort()
        raise
    finally:
        server.close()
    return fabric(spec, links)


def _acceptor(
    spec: ClusterSpec, accepted: asyncio.Queue[tuple[int, Link] | BaseException]
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """The server's handler: check a higher peer's hello, answer it, queue the link.

    A connection that is no peer (:class:`NotAPeer`: garbage, a hello too long or too slow,
    or one the secret does not prove) is closed and logged, and start-up goes on; a peer
    whose proven hello does not match queues its :class:`ClusterError`; one that hangs up
    midway is dropped without one (it may dial again).
    """
    expected = set(range(spec.index + 1, spec.processes))

    async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        where = f"a peer at {host}:{port}"
        try:
            index = _check_hello(spec, await _read_hello(reader, where), None, where)
            if index not in expected:
                raise ClusterError(f"{where}: process index {index} does not connect here")
            expected.discard(index)
            writer.write(MAGIC + _frame(_hello(spec)))
            await writer.drain()
            await accepted.put((index, Link(index, reader, writer)))
        except NotAPeer as error:
            writer.close()
            log.warning("%s; only that connection is closed", error)
        except TimeoutError:
            writer.close()
            log.warning(
                "%s: no hello within %g s; only that connection is closed", where, HELLO_SECONDS
            )
        except (ClusterError, asyncio.IncompleteReadError, ConnectionError) as error:
            writer.close()
            if isinstance(error, ClusterError):
                await accepted.put(error)

    return on_accept


async def _take_accepted(
    spec: ClusterSpec,
    links: dict[int, Link],
    accepted: asyncio.Queue[tuple[int, Link] | BaseException],
    deadline: float,
) -> None:
    """Add the accepted links to ``links`` until every peer is linked, or fail by ``deadline``."""
    loop = asyncio.get_running_loop()
    while len(links) < spec.processes - 1:
        left = deadline - loop.time()
        if left <= 0:
            missing = sorted(set(range(spec.processes)) - set(links) - {spec.index})
            names = ", ".join(spec.name(p) for p in missing)
            raise ClusterError(f"{names} did not connect within {spec.startup_timeout:g} s")
        try:
            got = await asyncio.wait_for(accepted.get(), left)
        except TimeoutError:
            continue
        if isinstance(got, BaseException):
            raise got
        links[got[0]] = got[1]


async def _dial(spec: ClusterSpec, peer: int, deadline: float) -> Link:
    """Connect to ``peer`` (retrying until ``deadline``) and exchange hellos."""
    loop = asyncio.get_running_loop()
    host, port = spec.peers[peer]
    where = spec.name(peer)
    last: Exception | None = None
    while loop.time() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as error:
            last = error
            await asyncio.sleep(0.05)
            continue
        try:
            writer.write(MAGIC + _frame(_hello(spec)))
            await writer.drain()
            magic = await asyncio.wait_for(
                reader.readexactly(len(MAGIC)), max(0.1, deadline - loop.time())
            )
            if magic != MAGIC:
                raise ClusterError(f"{where}: not a Frontier cluster peer")
            _check_hello(spec, await _read_frame(reader), peer, where)
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            # The peer refused our hello (it closes on a mismatch): say what it saw, if we
            # can tell; the peer's own error names the field.
            writer.close()
            raise ClusterError(
                f"{where} closed the connection during the hello (a mismatch it reports: "
                f"size, version or secret): {error!r}"
            ) from None
        except TimeoutError:
            writer.close()
            raise ClusterError(f"{where}: no hello within the start-up timeout") from None
        return Link(peer, reader, writer)
    raise ClusterError(f"{where} was not reachable within {spec.startup_timeout:g} s ({last})")


def parse_peers(text: str) -> tuple[tuple[str, int], ...]:
    """``host0:port0,host1:port1`` as addresses; :class:`ClusterError` if malformed."""
    peers: list[tuple[str, int]] = []
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClusterError(f"a peer must be host:port, not {part.strip()!r}")
        peers.append((host, int(port)))
    return tuple(peers)
