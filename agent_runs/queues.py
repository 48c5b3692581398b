"""The RQ queue the workers take their jobs from (runs, and push deliveries): below the
services that put jobs on it (services/queue.py, push/services.py)."""

from functools import cache

import django_rq
from django.conf import settings
from rq import Queue


@cache
def runs_queue() -> Queue:
    """The runs queue, made once per process so its Redis connection pool is reused
    (redis-py pools are thread-safe)."""
    return django_rq.get_queue(settings.AGENT_RUNS_QUEUE)
