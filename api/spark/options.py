"""The Spark data source's options: parsed and checked once, in pure Python (no JVM, no pyspark).

Spark hands options over lower-cased with string values; :func:`sink_options` and
:func:`source_options` accept any case and answer frozen dataclasses, or raise
:class:`OptionError` naming the option. The names of transactions, idempotency keys and
consumers are built here too, so the tasks and the committer agree on them.

>>> sink_options({"url": "http://h:1/", "dataflow": "d", "input": "i", "time": "3",
...               "writerId": "orders-2026-01-05"}).time
3
>>> transaction_name("w1", 4, 0)
'spark.w1.p4.a0'
>>> transaction_name("w1", 4, 1, batch=7)
'spark.w1.b7.p4.a1'
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

MAX_SPARK_TIME = 2**63 - 1
"""Spark's LONG is signed: the largest time a Spark column can carry."""

DEFAULT_BATCH_SIZE = 50_000
"""Rows per staging request: five of Spark's 10,000-row Arrow batches. Fewer, larger requests
took the sink from 0.75 to 1.04 M rows/s into a live dataflow (bench/spark.py); a body of
50,000 rows of a few short columns is a few MiB, well under the server's ``max_body_bytes``."""

MAX_BATCH_SIZE = 100_000
"""The server's default ``max_batch_records``."""

DEFAULT_PAGE_TIMES = 100
"""Completed times per read request (the server allows up to 1000)."""

DEFAULT_MAX_TASK_ATTEMPTS = 4
"""Spark's default ``spark.task.maxFailures``: the attempts whose leftovers commit and abort
sweep away."""

DEFAULT_COMMIT_RETRY_SECONDS = 60.0
"""How long the committer keeps making its idempotent commit again while the server cannot
answer (a restart takes a few seconds, a recovery of a large log longer)."""

MAX_COMMIT_RETRY_SECONDS = 86_400.0
"""The longest ``commitRetrySeconds``: a day."""

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$")

Advance = Literal["max", "none", "close"]
LateRows = Literal["fail", "drop"]


class OptionError(ValueError):
    """An option of the ``frontier`` data source is missing or has a wrong value."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


CONNECTION_OPTIONS = ("url", "dataflow", "token", "timeout")
SINK_OPTIONS = (
    *CONNECTION_OPTIONS,
    "input",
    "timeColumn",
    "time",
    "timeOffset",
    "valueColumn",
    "advanceFrontier",
    "writerId",
    "batchSize",
    "maxTaskAttempts",
    "allowedLateness",
    "lateRows",
    "commitRetrySeconds",
)
"""Every option the sink takes."""
SOURCE_OPTIONS = (
    *CONNECTION_OPTIONS,
    "output",
    "startingTime",
    "endingTime",
    "numPartitions",
    "recordSchema",
    "maxRecordsPerTrigger",
    "consumerId",
    "pageTimes",
)
"""Every option the source takes."""
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")
"""Options Spark itself may pass along to a data source: not ours, not refused."""


def _known(options: dict[str, str], known: tuple[str, ...], what: str) -> None:
    """:class:`OptionError` for an option the ``what`` does not take (a misspelt one, say)."""
    names = {name.lower(): name for name in (*known, *SPARK_OPTIONS)}
    for key in options:
        if key not in names:
            close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.7)
            hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
            raise OptionError(
                f"the frontier {what} has no option {key!r}{hint}; it takes {', '.join(known)}"
            )


def _required(options: dict[str, str], key: str, what: str) -> str:
    value = options.get(key.lower(), "").strip()
    if not value:
        raise OptionError(f"option {key!r} is required: {what}")
    return value


def _int(
    options: dict[str, str],
    key: str,
    default: int | None,
    least: int = 0,
    most: int = MAX_SPARK_TIME,
) -> int | None:
    raw = options.get(key.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, not {raw!r}") from None
    if not least <= value <= most:
        raise OptionError(f"option {key!r} must be from {least} to {most}, not {value}")
    return value


def _bool(options: dict[str, str], key: str, default: bool) -> bool:
    raw = options.get(key.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key!r} must be true or false, not {raw!r}")


def _name(options: dict[str, str], key: str, what: str) -> str:
    value = _required(options, key, what)
    if not _NAME.match(value):
        raise OptionError(
            f"option {key!r} must be a node name (letters, digits, _ . -), not {value!r}"
        )
    return value


def _identifier(options: dict[str, str], key: str) -> str | None:
    raw = options.get(key.lower())
    if raw is None:
        return None
    value = raw.strip()
    if not _ID.match(value):
        raise OptionError(
            f"option {key!r} must be 1 to 100 letters, digits, _ or - (it names server "
            f"objects), not {raw!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the server is and how to talk to it."""

    url: str
    dataflow: str
    token: str | None = None
    timeout: float = 60.0


def connection(options: dict[str, str]) -> Connection:
    """The ``url``, ``dataflow``, ``token`` (or ``$FRONTIER_TOKEN``) and ``timeout`` options."""
    url = _required(options, "url", "the Frontier server, e.g. http://127.0.0.1:8080")
    if not url.startswith(("http://", "https://")):
        raise OptionError(f"option 'url' must be an http:// or https:// URL, not {url!r}")
    dataflow = _required(options, "dataflow", "the id of the dataflow")
    token = options.get("token") or os.environ.get("FRONTIER_TOKEN") or None
    raw_timeout = options.get("timeout", "60")
    try:
        timeout = float(raw_timeout)
    except ValueError:
        raise OptionError(f"option 'timeout' must be seconds, not {raw_timeout!r}") from None
    if not timeout > 0:
        raise OptionError(f"option 'timeout' must be positive, not {raw_timeout!r}")
    return Connection(url.rstrip("/"), dataflow, token, timeout)


# --------------------------------------------------------------------------- the sink


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """How a DataFrame becomes records of an input.

    Each row is a record at the time in ``time_column`` (or the fixed ``time``; for a stream
    with neither, ``batchId + time_offset``). The record is the row's other columns as a JSON
    object, or the JSON text in ``value_column``. ``writer_id`` names the write (a batch job,
    or a stream's query): what keeps it exactly once when it is run again.
    """

    connection: Connection
    input: str
    time_column: str | None = None
    time: int | None = None
    time_offset: int = 0
    value_column: str | None = None
    advance: Advance = "max"
    writer_id: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    max_task_attempts: int = DEFAULT_MAX_TASK_ATTEMPTS
    allowed_lateness: int = 0
    """With ``time_column`` and ``advance`` max: how many of the latest times written stay
    open after a commit (the input advances to the largest time written + 1 - this). A
    stream must give it."""
    late_rows: LateRows = "fail"
    """What becomes of rows before the input's time: ``fail`` the write (unless it was
    committed before: a re-run), or ``drop`` them (and count them, on the server). ``drop``
    by default for a stream with ``time_column``, ``fail`` otherwise."""
    commit_retry_seconds: float = DEFAULT_COMMIT_RETRY_SECONDS
    """How long the committer makes its idempotent commit again (with backoff) while the
    server does not answer or answers 503."""


def sink_options(
    raw: Mapping[str, str], streaming: bool = False, watermarks: Mapping[str, int] | None = None
) -> SinkOptions:
    """The sink's options; :class:`OptionError` if one is missing or wrong.

    Options: ``url``, ``dataflow``, ``input`` (required); ``timeColumn`` or ``time`` (one is
    required for a batch write; a stream without either writes at ``batchId + timeOffset``);
    ``valueColumn``; ``advanceFrontier`` (``max``: past the largest time written, the default;
    ``none``; ``close``: close the input); ``writerId`` (required: it names the write, and
    keys its idempotent commit, or each micro-batch's); ``allowedLateness`` (with
    ``timeColumn``: how many of the latest times written stay open; required for a stream
    with ``timeColumn`` and ``advanceFrontier`` max); ``lateRows`` (``fail`` or ``drop``;
    ``drop`` by default for a stream with ``timeColumn``); ``commitRetrySeconds`` (how long
    the commit is made again while the server cannot answer, 60 by default); ``batchSize``
    (rows per request); ``maxTaskAttempts``; ``token``; ``timeout``. ``watermarks`` are the
    query's watermarked columns and their delays (ms), named when ``allowedLateness`` is
    missing.
    """
    options = _lower(raw)
    _known(options, SINK_OPTIONS, "sink")
    conn = connection(options)
    input_name = _name(options, "input", "the dataflow input to write into")
    time_column, time, time_offset = _sink_times(options, streaming)
    value_column = options.get("valuecolumn") or None
    if value_column is not None and value_column == time_column:
        raise OptionError("options 'valueColumn' and 'timeColumn' name the same column")
    advance = _advance(options, streaming)
    writer_id = _writer_id(options, streaming)
    lateness = _lateness(options, time_column, advance)
    if streaming and time_column is not None and advance == "max" and lateness is None:
        raise OptionError(_lateness_needed(time_column, watermarks or {}))
    late_rows = _late_rows(options, "drop" if streaming and time_column else "fail")
    batch_size = _int(options, "batchSize", DEFAULT_BATCH_SIZE, 1, MAX_BATCH_SIZE)
    attempts = _int(options, "maxTaskAttempts", DEFAULT_MAX_TASK_ATTEMPTS, 1, 1000)
    assert batch_size is not None and attempts is not None
    return SinkOptions(
        conn,
        input_name,
        time_column,
        time,
        time_offset,
        value_column,
        advance,
        writer_id,
        batch_size,
        attempts,
        lateness or 0,
        late_rows,
        _seconds(options, "commitRetrySeconds", DEFAULT_COMMIT_RETRY_SECONDS),
    )


def _sink_times(options: dict[str, str], streaming: bool) -> tuple[str | None, int | None, int]:
    """The sink's ``timeColumn``, ``time`` and ``timeOffset``: at most one way to time rows."""
    time_column = options.get("timecolumn") or None
    time = _int(options, "time", None)
    if time_column is not None and time is not None:
        raise OptionError("give either option 'timeColumn' or option 'time', not both")
    if not streaming and time_column is None and time is None:
        raise OptionError(
            "a batch write needs option 'timeColumn' (a column of integer times) or option "
            "'time' (one time for every row)"
        )
    time_offset = _int(options, "timeOffset", 0)
    assert time_offset is not None
    if "timeoffset" in options and not streaming:
        raise OptionError("option 'timeOffset' is for streaming writes (time = batchId + offset)")
    return time_column, time, time_offset


def _advance(options: dict[str, str], streaming: bool) -> Advance:
    """The sink's ``advanceFrontier``: ``max`` (the default), ``none`` or ``close`` (batch)."""
    advance = options.get("advancefrontier", "max").strip().lower()
    if advance not in ("max", "none", "close"):
        raise OptionError(
            f"option 'advanceFrontier' must be max (past the largest time written), none or "
            f"close, not {options['advancefrontier']!r}"
        )
    if streaming and advance == "close":
        raise OptionError(
            "option 'advanceFrontier' close is for batch writes: a stream writes on after "
            "each micro-batch (close the input when the query is done)"
        )
    return advance  # type: ignore[return-value]


def _writer_id(options: dict[str, str], streaming: bool) -> str:
    """The sink's ``writerId``, which every write needs: it keys the write's commits."""
    writer_id = _identifier(options, "writerId")
    if writer_id is None:
        raise OptionError(
            "a streaming write needs option 'writerId': a name that stays the same across "
            "restarts of the query, so a replayed micro-batch is recognised and applied once"
            if streaming
            else "a write needs option 'writerId': a name for this write that stays the same "
            "when the job is run again (after its driver died, say), so a write committed "
            "before is recognised and not applied twice; another write needs another name "
            "(orders-2026-01-05, say)"
        )
    return writer_id


def _lateness(options: dict[str, str], time_column: str | None, advance: Advance) -> int | None:
    """The sink's ``allowedLateness`` (``None``: not given): for rows with their own times."""
    lateness = _int(options, "allowedLateness", None)
    if lateness is not None and (time_column is None or advance != "max"):
        raise OptionError(
            "option 'allowedLateness' is for rows with their own times (option 'timeColumn') "
            "written with advanceFrontier max: it keeps the latest times open for late rows"
        )
    return lateness


def _lateness_needed(time_column: str, watermarks: Mapping[str, int]) -> str:
    """Why a stream with event times needs ``allowedLateness``, and why no watermark gives it."""
    message = (
        f"a streaming write with option 'timeColumn' ({time_column!r}) and advanceFrontier max "
        f"needs option 'allowedLateness': how many of the latest times written a later "
        f"micro-batch may still write into. The input is kept that far behind the largest "
        f"time written so far, so no time is reported complete while a later micro-batch may "
        f"still write into it; rows later still are dropped and counted (lateRows=drop, the "
        f"default for streams). Give 0 if no micro-batch ever goes back in time."
    )
    if watermarks:
        named = ", ".join(f"{name!r} ({delay} ms)" for name, delay in watermarks.items())
        message += (
            f" The query's watermark on {named} cannot give it: Spark keeps a watermark on a "
            f"TIMESTAMP column, in milliseconds, and the sink's times are integers in units "
            f"of your own."
        )
    return message


def _seconds(options: dict[str, str], key: str, default: float) -> float:
    """A number of seconds from 0 to :data:`MAX_COMMIT_RETRY_SECONDS` (a fraction too)."""
    raw = options.get(key.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be a number of seconds, not {raw!r}") from None
    if not 0 <= value <= MAX_COMMIT_RETRY_SECONDS:  # NaN too
        raise OptionError(
            f"option {key!r} must be from 0 to {MAX_COMMIT_RETRY_SECONDS:g} seconds, not {raw!r}"
        )
    return value


def _late_rows(options: dict[str, str], default: LateRows) -> LateRows:
    """The sink's ``lateRows``: ``fail`` or ``drop`` (``default`` when not given)."""
    late_rows = options.get("laterows", default).strip().lower()
    if late_rows not in ("fail", "drop"):
        raise OptionError(
            f"option 'lateRows' must be fail (a row before the input's time fails the write) "
            f"or drop (such rows are dropped), not {options['laterows']!r}"
        )
    return late_rows  # type: ignore[return-value]


def transaction_name(writer: str, partition: int, attempt: int, batch: int | None = None) -> str:
    """The staged transaction of one task attempt: deterministic, so a committer can find it."""
    if batch is None:
        return f"spark.{writer}.p{partition}.a{attempt}"
    return f"spark.{writer}.b{batch}.p{partition}.a{attempt}"


def idempotency_key(writer: str, batch: int | None = None) -> str:
    """The commit's idempotency key: the writer (a batch job) or writer and micro-batch."""
    return f"spark.{writer}" if batch is None else f"spark.{writer}.b{batch}"


def swept_attempts(max_task_attempts: int, succeeded: int | None) -> range:
    """The attempt numbers whose transactions a commit or abort discards for one partition.

    Every attempt Spark may have made: up to ``max_task_attempts``, and at least up to the
    successful one (speculative attempts may number past the retries).
    """
    top = max_task_attempts if succeeded is None else max(max_task_attempts, succeeded + 1)
    return range(top)


# --------------------------------------------------------------------------- the source


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Which completed times of an output to read, and how."""

    connection: Connection
    output: str
    starting: int | Literal["earliest", "latest"] = "earliest"
    ending: int | None = None
    num_partitions: int = 1
    record_schema: str | None = None
    max_records_per_trigger: int | None = None
    consumer_id: str | None = None
    page_times: int = DEFAULT_PAGE_TIMES


def source_options(raw: Mapping[str, str]) -> SourceOptions:
    """The source's options; :class:`OptionError` if one is missing or wrong.

    Options: ``url``, ``dataflow``, ``output`` (required); ``startingTime`` (an integer,
    ``earliest`` (the default: the oldest retained time) or ``latest`` (streams: the output's
    frontier now)); ``endingTime`` (exclusive; a stream reads up to it, then nothing more);
    ``numPartitions``; ``recordSchema`` (a DDL string of fields parsed from each record's
    JSON, e.g. ``key STRING, count LONG``);
    ``maxRecordsPerTrigger`` (streams: whole times only); ``consumerId`` (streams: registers
    the query as a consumer, so the output keeps what it has not read and forgets the rest);
    ``pageTimes``; ``token``; ``timeout``.
    """
    options = _lower(raw)
    _known(options, SOURCE_OPTIONS, "source")
    conn = connection(options)
    output = _name(options, "output", "the dataflow output to read")
    starting: int | Literal["earliest", "latest"]
    raw_start = options.get("startingtime", "earliest").strip().lower()
    if raw_start in ("earliest", "latest"):
        starting = raw_start  # type: ignore[assignment]
    else:
        value = _int(options, "startingTime", 0)
        assert value is not None
        starting = value
    ending = _int(options, "endingTime", None)
    if isinstance(starting, int) and ending is not None and ending < starting:
        raise OptionError(f"option 'endingTime' ({ending}) is before 'startingTime' ({starting})")
    partitions = _int(options, "numPartitions", 1, 1, 10_000)
    limit = _int(options, "maxRecordsPerTrigger", None, 1)
    schema = options.get("recordschema", "").strip() or None
    page = _int(options, "pageTimes", DEFAULT_PAGE_TIMES, 1, 1000)
    assert partitions is not None and page is not None
    return SourceOptions(
        conn,
        output,
        starting,
        ending,
        partitions,
        schema,
        limit,
        _identifier(options, "consumerId"),
        page,
    )


def source_schema(options: SourceOptions) -> str:
    """The DDL schema the source declares: ``time LONG, record STRING`` or typed fields."""
    if options.record_schema is None:
        return "time LONG, record STRING"
    return f"time LONG, {options.record_schema}"
