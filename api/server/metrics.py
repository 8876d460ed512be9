"""Prometheus metrics, read from the manager at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.server.auth import authenticate
from api.server.connections import CONNECTIONS, Connections
from api.server.context import MANAGER, SETTINGS
from service.app import DataflowManager


class ManagerCollector(Collector):
    """Records in and out, late rows dropped, frontier lag, subscribers, queues, per dataflow.

    Per-dataflow series are of one tenant's dataflows (``tenant``); with ``tenant=None``
    there are none, only what names no dataflow: counts by status, the store's figures.
    """

    def __init__(self, manager: DataflowManager, tenant: str | None) -> None:
        self._manager = manager
        self._tenant = tenant

    def collect(self) -> Iterator[Metric]:
        """One sample per input, output and dataflow."""
        records_in = CounterMetricFamily(
            "frontier_records_in", "Records pushed into an input", labels=["dataflow", "input"]
        )
        dropped_late = CounterMetricFamily(
            "frontier_records_dropped_late",
            "Rows producers dropped as late (before the input's time), as their commits said",
            labels=["dataflow", "input"],
        )
        records_out = CounterMetricFamily(
            "frontier_records_out", "Records leaving at an output", labels=["dataflow", "output"]
        )
        lag = GaugeMetricFamily(
            "frontier_output_lag",
            "How far an output's frontier is behind its inputs' (integer times)",
            labels=["dataflow", "output"],
        )
        subscribers = GaugeMetricFamily(
            "frontier_subscribers", "Open output subscribers", labels=["dataflow", "output"]
        )
        queued = GaugeMetricFamily(
            "frontier_subscriber_queue_depth",
            "Events queued for output subscribers",
            labels=["dataflow", "output"],
        )
        dataflows = GaugeMetricFamily(
            "frontier_dataflows", "Dataflows by status", labels=["status"]
        )
        by_status: dict[str, int] = {}
        for stats in self._manager.stats(self._tenant):
            by_status[stats.status] = by_status.get(stats.status, 0) + 1
            if self._tenant is None:
                continue  # the count only: no dataflow's id without its tenant's token
            for name, count in stats.records_in.items():
                records_in.add_metric([stats.id, name], count)
            for name, count in stats.dropped_late.items():
                dropped_late.add_metric([stats.id, name], count)
            for name, output in stats.outputs.items():
                labels = [stats.id, name]
                records_out.add_metric(labels, output.records_out)
                if output.lag is not None:
                    lag.add_metric(labels, output.lag)
                subscribers.add_metric(labels, output.subscribers)
                queued.add_metric(labels, output.queued)
        for status, count in by_status.items():
            dataflows.add_metric([status], count)
        yield from self._store()
        yield from self._loop()
        yield from (records_in, dropped_late, records_out, lag, subscribers, queued, dataflows)

    def _loop(self) -> Iterator[Metric]:
        lag = self._manager.loop_lag
        yield GaugeMetricFamily(
            "frontier_event_loop_lag_seconds",
            "The event loop's worst lateness over the last second (a timer's delay)",
            value=lag.last,
        )
        yield CounterMetricFamily(
            "frontier_event_loop_stalls",
            "Times the event loop ran nothing for 0.5 s or more",
            lag.total_stalls,
        )

    def _store(self) -> Iterator[Metric]:
        stats = self._manager.store_stats()
        if stats is None:
            return
        yield GaugeMetricFamily(
            "frontier_log_bytes", "Bytes held in the inputs' logs", value=stats.log_bytes
        )
        yield CounterMetricFamily(
            "frontier_log_syncs", "Sync rounds of the inputs' logs (group commit)", stats.syncs
        )
        yield CounterMetricFamily(
            "frontier_log_sync_seconds", "Time spent syncing the inputs' logs", stats.sync_seconds
        )
        yield GaugeMetricFamily(
            "frontier_log_last_sync_seconds",
            "How long the last sync round took",
            value=stats.last_sync_seconds,
        )
        yield CounterMetricFamily(
            "frontier_recovery_records_replayed",
            "Records replayed from the logs at the last start",
            stats.records_replayed,
        )
        if stats.recovery_seconds is not None:
            yield GaugeMetricFamily(
                "frontier_recovery_seconds",
                "How long the last start took to recover the data directory",
                value=stats.recovery_seconds,
            )


class ConnectionsCollector(Collector):
    """The listening socket's connections: open, refused at the cap, timed out."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    def collect(self) -> Iterator[Metric]:
        """Three samples."""
        held = self._connections
        yield GaugeMetricFamily("frontier_connections", "Open client connections", held.open)
        yield CounterMetricFamily(
            "frontier_connections_refused",
            "Connections answered 503 because max_connections were open",
            held.refused,
        )
        yield CounterMetricFamily(
            "frontier_connections_timed_out",
            "Connections closed because their headers took over header_timeout_seconds",
            held.timed_out,
        )


def _scraper(request: web.Request) -> str | None:
    """Whose dataflows a scrape sees: the token's tenant; nobody's without a token.

    ``/metrics`` needs no token, so that a scraper can always see the server's health; on
    a server with tokens, dataflow ids (and what they do) are shown only to their tenant.
    """
    settings = request.app[SETTINGS]
    if not settings.tokens:
        return "default"
    header = request.headers.get("Authorization")
    return None if header is None else authenticate(settings, header)


async def metrics_handler(request: web.Request) -> web.Response:
    """The Prometheus text exposition."""
    registry = CollectorRegistry()
    registry.register(ManagerCollector(request.app[MANAGER], _scraper(request)))
    connections = request.app.get(CONNECTIONS)
    if connections is not None:
        registry.register(ConnectionsCollector(connections))
    return web.Response(body=generate_latest(registry), content_type="text/plain", charset="utf-8")
