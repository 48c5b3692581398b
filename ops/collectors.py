"""Fleet-wide metrics read when ``/metrics`` is scraped (from PostgreSQL and Redis), so that
every web process reports the same figures. They live in a registry of their own, which only
the web's ``/metrics`` serves: a worker never runs these queries."""

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from ops import selectors

logger = logging.getLogger(__name__)


class FleetCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._database()
        except DatabaseError:
            logger.warning("fleet metrics: the database did not answer", exc_info=True)
        try:
            depth = selectors.queue_depth()
        except RedisError:
            logger.warning("fleet metrics: Redis did not answer", exc_info=True)
        else:
            yield GaugeMetricFamily(
                "agent_runs_queue_depth", "Jobs waiting in the RQ runs queue.", value=depth
            )

    def _database(self) -> Iterator[Metric]:
        active = GaugeMetricFamily(
            "agent_runs_active", "Runs queued, running and paused.", labels=["status"]
        )
        for status, runs in selectors.runs_active_by_status().items():
            active.add_metric([status], runs)
        oldest = selectors.oldest_queued_wait()
        workers = selectors.workers_beating()
        yield active
        yield GaugeMetricFamily(
            "agent_runs_oldest_queued_seconds",
            "How long the oldest queued run has waited (0 with none queued).",
            value=oldest,
        )
        yield GaugeMetricFamily(
            "agent_workers_beating",
            "Workers whose beat is newer than WORKER_STALE_SECONDS.",
            value=workers,
        )


FLEET_REGISTRY = CollectorRegistry(auto_describe=False)
FLEET_REGISTRY.register(FleetCollector())
