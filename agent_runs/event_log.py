"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
"""

import json
import logging
import uuid
from functools import cache
from typing import Any

import redis
from ag_ui.core import BaseEvent
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from redis.exceptions import RedisError

from agent_runs.codec import TERMINAL_TYPES, EventSequence, encode_event
from agent_runs.models import Run, RunEvent

logger = logging.getLogger(__name__)


def stream_key(thread_id: uuid.UUID | str) -> str:
    """One stream per thread, so a Redis cluster shards by thread."""
    return f"agent:thread:{{{thread_id}}}:events"


@cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


class RunEventEmitter:
    """Emits one run's AG-UI events in order: checked by the codec's ordering rules, stored
    in PostgreSQL, and added to the thread's Redis stream once the row is committed.

    Each stream entry carries the id of the thread's previous event, so a reader can tell
    that Redis missed one (it was down, or flushed) and fetch it from PostgreSQL.
    """

    def __init__(self, *, run: Run, resume: bool = False) -> None:
        """``resume``: continue a run whose events were emitted elsewhere (a job that died),
        so only its ending is left to emit."""
        self.run = run
        self.sequence = EventSequence()
        if resume:
            emitted = set(run.events.values_list("type", flat=True).distinct())
            self.sequence.started = bool(emitted)
            self.sequence.ended = bool(emitted & TERMINAL_TYPES)
        self.previous_id = (
            RunEvent.objects.filter(thread_id=run.thread_id).aggregate(last=Max("id"))["last"] or 0
        )

    def emit(self, event: BaseEvent) -> RunEvent:
        payload = encode_event(event)
        self.sequence.check(payload)
        row = RunEvent.objects.create(
            thread_id=self.run.thread_id, run=self.run, type=payload["type"], payload=payload
        )
        fields: dict[Any, Any] = {
            "id": row.pk,
            "prev": self.previous_id,
            "data": json.dumps(payload),
        }
        self.previous_id = row.pk
        transaction.on_commit(lambda: _publish(self.run.thread_id, fields))
        return row

    @property
    def started(self) -> bool:
        return self.sequence.started

    @property
    def ended(self) -> bool:
        return self.sequence.ended


def _publish(thread_id: uuid.UUID, fields: dict[Any, Any]) -> None:
    try:
        redis_client().xadd(
            stream_key(thread_id),
            fields,
            maxlen=settings.AGENT_EVENTS_STREAM_MAXLEN,
            approximate=True,
        )
    except RedisError:
        # PostgreSQL has the event; readers fetch what the stream lacks from there.
        logger.warning("could not publish event %s to Redis", fields["id"], exc_info=True)
