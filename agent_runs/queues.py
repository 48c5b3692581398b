"""The RQ queue the workers take their jobs from (runs, and push deliveries): below the
services that put jobs on it (services/queue.py, push/services.py)."""

from functools import cache

import django_rq
from django.conf import settings
from rq import Queue

from agent_runs.events.store import redis_client


@cache
def runs_queue() -> Queue:
    """The runs queue, made once per process on the connection pool the journal publishes
    with (one pool of the process, not two: RQ_QUEUES names the same REDIS_URL), so its
    connections are reused (redis-py pools are thread-safe)."""
    return django_rq.get_queue(settings.AGENT_RUNS_QUEUE, connection=redis_client())
