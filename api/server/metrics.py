"""Prometheus metrics, read from the manager at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.server.context import MANAGER
from service.app import DataflowManager


class ManagerCollector(Collector):
    """Records in and out, frontier lag, subscribers and queue depths, per dataflow."""

    def __init__(self, manager: DataflowManager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        """One sample per input, output and dataflow."""
        records_in = CounterMetricFamily(
            "frontier_records_in", "Records pushed into an input", labels=["dataflow", "input"]
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
        for stats in self._manager.stats():
            by_status[stats.status] = by_status.get(stats.status, 0) + 1
            for name, count in stats.records_in.items():
                records_in.add_metric([stats.id, name], count)
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
        yield from (records_in, records_out, lag, subscribers, queued, dataflows)

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


async def metrics_handler(request: web.Request) -> web.Response:
    """The Prometheus text exposition."""
    registry = CollectorRegistry()
    registry.register(ManagerCollector(request.app[MANAGER]))
    return web.Response(body=generate_latest(registry), content_type="text/plain", charset="utf-8")
