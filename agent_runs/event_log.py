"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
"""

import json
import logging
import time
import uuid
from functools import cache
from typing import Any

import redis
from ag_ui.core import BaseEvent, EventType
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from redis.exceptions import RedisError

from agent_runs.codec import TERMINAL_TYPES, EventSequence, encode_event
from agent_runs.models import Run, RunEvent

logger = logging.getLogger(__name__)

_DELTA_TYPES = frozenset({EventType.TEXT_MESSAGE_CONTENT.value, EventType.TOOL_CALL_ARGS.value})


def stream_key(thread_id: uuid.UUID | str) -> str:
    """One stream per thread, so a Redis cluster shards by thread."""
    return f"agent:thread:{{{thread_id}}}:events"


@cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


class RunEventEmitter:
    """Emits one run's AG-UI events in order: checked by the codec's ordering rules, stored
    in PostgreSQL, and added to the thread's Redis stream once the rows are committed.

    Deltas (``TEXT_MESSAGE_CONTENT``, ``TOOL_CALL_ARGS``) that follow each other within
    ``batch_window`` seconds are written together; any other event, a full batch, or a call
    to ``flush()`` (the job makes one whenever the model goes quiet) writes what is pending.
    Each stream entry carries the id of the thread's previous event, so a reader can tell
    that Redis missed one (it was down, or flushed) and fetch it from PostgreSQL.
    """

    def __init__(
        self,
        *,
        run: Run,
        resume: bool = False,
        batch_window: float = 0.002,
        max_batch: int = 500,
    ) -> None:
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
        self.batch_window = batch_window
        self.max_batch = max_batch
        self._pending: list[dict[str, Any]] = []
        self._last_flush = 0.0

    def emit(self, event: BaseEvent) -> None:
        payload = encode_event(event)
        self.sequence.check(payload)
        self._pending.append(payload)
        if (
            payload["type"] not in _DELTA_TYPES
            or len(self._pending) >= self.max_batch
            or time.monotonic() - self._last_flush >= self.batch_window
        ):
            self.flush()

    def flush(self) -> None:
        """Write the pending events now."""
        if not self._pending:
            return
        rows = RunEvent.objects.bulk_create(
            [
                RunEvent(thread_id=self.run.thread_id, run=self.run, type=p["type"], payload=p)
                for p in self._pending
            ]
        )
        entries = []
        for row in rows:
            entries.append(
                {"id": row.pk, "prev": self.previous_id, "data": json.dumps(row.payload)}
            )
            self.previous_id = row.pk
        thread_id = self.run.thread_id
        transaction.on_commit(lambda: _publish(thread_id, entries))
        self._pending = []
        self._last_flush = time.monotonic()

    @property
    def started(self) -> bool:
        return self.sequence.started

    @property
    def ended(self) -> bool:
        return self.sequence.ended


def _publish(thread_id: uuid.UUID, entries: list[dict[Any, Any]]) -> None:
    try:
        with redis_client().pipeline(transaction=False) as pipe:
            for fields in entries:
                pipe.xadd(
                    stream_key(thread_id),
                    fields,
                    maxlen=settings.AGENT_EVENTS_STREAM_MAXLEN,
                    approximate=True,
                )
            pipe.execute()
    except RedisError:
        # PostgreSQL has the events; readers fetch what the stream lacks from there.
        logger.warning("could not publish %d events to Redis", len(entries), exc_info=True)
