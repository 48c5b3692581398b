"""Rate limits per user on creating runs (docs/operations.md, "Rate limits"): how many a
user may create per window (``RATE_LIMIT_RUNS``, e.g. ``60/minute``, the ``limits``
library's moving window in Redis) and how many may be active at once
(``MAX_ACTIVE_RUNS_PER_USER``: queued, running, paused or waiting on an interrupt). Over
either, ``RateLimited`` (429 with ``Retry-After``, in each protocol's shape). Reading streams
is never limited. Redis unreachable: the window is not counted (runs are accepted, as
without a limit), logged once a minute and counted in ``/metrics``."""

import logging
import math
import time
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from limits import RateLimitItem, parse
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter
from redis.exceptions import RedisError

from agent_runs import metrics
from agent_runs.errors import DomainError
from agent_runs.models import RUN_ACTIVE_STATUSES, Interrupt, Run

logger = logging.getLogger(__name__)

_NAMESPACE = "runs"
_LOG_EVERY_SECONDS = 60.0


class RateLimited(DomainError):
    """A user over a rate limit; ``retry_after``: the seconds until a run would be taken
    (each protocol sends it as ``Retry-After``)."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)
        self.headers = {"Retry-After": str(self.retry_after)}


def rate_limits_on() -> bool:
    """Whether a limit is set (none is by default)."""
    return bool(settings.MAX_ACTIVE_RUNS_PER_USER) or runs_window() is not None


def run_rate_check(*, user_id: Any, adds_active: bool = True) -> None:
    """Before a run is created: ``RateLimited`` when the user is over a limit; a run that
    is taken counts in the window. ``adds_active``: the run adds to the runs active at once
    (one answering its thread's interrupts takes the place of the run that waits)."""
    limit = settings.MAX_ACTIVE_RUNS_PER_USER
    if adds_active and limit and active_runs_of(user_id=user_id) >= limit:
        raise RateLimited(
            f"too many runs at once: at most {limit} queued, running or waiting",
            retry_after=settings.RATE_LIMIT_ACTIVE_RETRY_SECONDS,
        )
    item = runs_window()
    if item is None:
        return
    try:
        limiter = _limiter()
        if limiter.hit(item, _NAMESPACE, str(user_id)):
            return
        reset = limiter.get_window_stats(item, _NAMESPACE, str(user_id)).reset_time
    except (StorageError, RedisError, ConnectionError, OSError) as exc:
        _unavailable(exc)
        return
    raise RateLimited(
        f"rate limit: at most {item.amount} runs per {item.multiples} {item.GRANULARITY.name}",
        retry_after=math.ceil(reset - time.time()),
    )


def active_runs_of(*, user_id: Any) -> int:
    """The user's runs queued, running or paused, and those waiting on an interrupt."""
    active = Run.objects.filter(thread__owner_id=user_id, status__in=RUN_ACTIVE_STATUSES)
    waiting = (
        Interrupt.objects.filter(thread__owner_id=user_id, status=Interrupt.Status.PENDING)
        .values("run_id")
        .distinct()
    )
    return active.count() + waiting.count()


@cache
def runs_window() -> RateLimitItem | None:
    """``RATE_LIMIT_RUNS`` read (``None``: no limit)."""
    text = settings.RATE_LIMIT_RUNS
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"RATE_LIMIT_RUNS must read like 60/minute, got {text!r}"
        ) from exc


@cache
def _limiter() -> MovingWindowRateLimiter:
    """The moving window in Redis: ``RATE_LIMIT_STORAGE_URL``, else this service's own
    (the embedded one's socket too)."""
    url = settings.RATE_LIMIT_STORAGE_URL or settings.REDIS_URL
    if url.startswith("unix://"):
        url = "redis+unix://" + url.removeprefix("unix://")
    return MovingWindowRateLimiter(storage_from_string(url, socket_timeout=1, wrap_exceptions=True))


_last_logged = [0.0]


def _unavailable(exc: BaseException) -> None:
    """Redis is unreachable: the run is taken; said once a minute, counted always."""
    metrics.RATE_LIMITER_UNAVAILABLE.inc()
    now = time.monotonic()
    if now - _last_logged[0] >= _LOG_EVERY_SECONDS:
        _last_logged[0] = now
        logger.warning("the rate limiter cannot reach Redis (%s): runs are not limited", exc)
