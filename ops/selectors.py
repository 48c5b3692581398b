"""Reads for the probes and the fleet metrics: PostgreSQL and Redis, each cheap enough to be
asked every second (the run counts read the ``run_status_created`` index)."""

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count
from django.db.models.functions import Now
from django.utils import timezone
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry
from rq.queue import Queue

from agent_runs.models import RUN_ACTIVE_STATUSES, Run, WorkerBeat


@cache
def probe_redis() -> redis.Redis:
    """A Redis client that gives up fast: a Redis that is down must fail the probe at once,
    not after the default socket timeout and retries."""
    timeout = settings.READYZ_TIMEOUT_SECONDS
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def queue_depth() -> int:
    """Jobs waiting in the runs queue (RedisError when Redis does not answer)."""
    client = probe_redis()
    # The synchronous client answers an int (redis-py types each command for both clients).
    return int(cast(int, client.llen(Queue(settings.AGENT_RUNS_QUEUE, connection=client).key)))


def workers_beating() -> int:
    """Workers whose beat is newer than ``WORKER_STALE_SECONDS``."""
    fresh = Now() - datetime.timedelta(seconds=settings.WORKER_STALE_SECONDS)
    return WorkerBeat.objects.filter(beat_at__gte=fresh).count()


def runs_active_by_status() -> dict[str, int]:
    """How many runs are queued, running and paused, fleet-wide (every status listed)."""
    counts = dict.fromkeys((str(status) for status in RUN_ACTIVE_STATUSES), 0)
    rows = (
        Run.objects.filter(status__in=RUN_ACTIVE_STATUSES)
        .values("status")
        .annotate(runs=Count("pk"))
        .order_by()
    )
    for row in rows:
        counts[row["status"]] = row["runs"]
    return counts


def oldest_queued_wait() -> float:
    """Seconds the oldest queued run has waited (0 with none queued)."""
    oldest = (
        Run.objects.filter(status=Run.Status.QUEUED)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    return 0.0 if oldest is None else max((timezone.now() - oldest).total_seconds(), 0.0)


@dataclass
class Check:
    ok: bool
    detail: str
    ms: float

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, "ms": round(self.ms, 1)}


def _timed(probe: Callable[[], tuple[bool, str]], errors: tuple[type[Exception], ...]) -> Check:
    start = time.perf_counter()
    try:
        ok, detail = probe()
    except errors as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:200]
    return Check(ok, detail, (time.perf_counter() - start) * 1000)


def _database() -> tuple[bool, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return True, "reachable"


def _redis() -> tuple[bool, str]:
    # A PING on a connection of its own, not a pooled one: a Redis whose socket file is gone
    # (or that takes no more connections) still answers the connections already open, while
    # a run could not be queued on a new one.
    pool = probe_redis().connection_pool
    connection = pool.connection_class(**pool.connection_kwargs)
    try:
        connection.send_command("PING")
        connection.read_response()
    finally:
        connection.disconnect()
    return True, "reachable"


def _workers() -> tuple[bool, str]:
    live = workers_beating()
    return live > 0, f"{live} beating within {settings.WORKER_STALE_SECONDS} s"


def _queue() -> tuple[bool, str]:
    depth, limit = queue_depth(), settings.READYZ_MAX_QUEUE_DEPTH
    return depth <= limit, f"{depth} waiting (limit {limit})"


def readiness() -> dict[str, Check]:
    """The readiness checks (docs/operations.md, "/readyz"): the database, Redis, at least
    one worker beating, the queue under its limit. A check that depends on one that failed
    is failed without being tried."""
    checks = {"database": _timed(_database, (DatabaseError,))}
    checks["redis"] = _timed(_redis, (RedisError,))
    if checks["database"].ok:
        checks["workers"] = _timed(_workers, (DatabaseError,))
    else:
        checks["workers"] = Check(False, "the database is unavailable", 0.0)
    if checks["redis"].ok:
        checks["queue"] = _timed(_queue, (RedisError,))
    else:
        checks["queue"] = Check(False, "Redis is unavailable", 0.0)
    return checks
