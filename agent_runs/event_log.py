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
from ag_ui.core import BaseEvent
from django.conf import settings
from django.db import connection as db_connection
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
    in PostgreSQL, and added to the thread's Redis stream once the rows are committed.

    Events that follow the last write within ``batch_window`` seconds wait to be written
    with the next ones; a terminal event, a full batch, or a call to ``flush()`` writes what
    is pending. The job flushes whenever the model goes quiet and before any call that may
    block, so nothing waits longer than the window for a client to see it.
    Each stream entry carries the id of the thread's previous event, so a reader can tell
    that Redis missed one (it was down, or flushed) and fetch it from PostgreSQL.
    """

    def __init__(
        self,
        *,
        run: Run,
        resume: bool = False,
        previous_id: int | None = None,
        batch_window: float = 0.005,
        max_batch: int = 500,
    ) -> None:
        """``resume``: continue a run whose events were emitted elsewhere (a job that died),
        so only its ending is left to emit. ``previous_id``: the thread's last event id, when
        the caller has read it already."""
        self.run = run
        self.sequence = EventSequence()
        if resume:
            emitted = set(run.events.values_list("type", flat=True).distinct())
            self.sequence.started = bool(emitted)
            self.sequence.ended = bool(emitted & TERMINAL_TYPES)
        if previous_id is None:
            last = RunEvent.objects.filter(thread_id=run.thread_id).aggregate(last=Max("id"))
            previous_id = last["last"] or 0
        self.previous_id = previous_id
        self.batch_window = batch_window
        self.max_batch = max_batch
        self._pending: list[dict[str, Any]] = []
        # The window opens with the emitter: a run's RUN_STARTED goes out with the router's
        # STEP_STARTED, flushed before its model call a few milliseconds later, in one write.
        self._last_flush = time.monotonic()

    def emit(self, event: BaseEvent) -> None:
        payload = encode_event(event)
        self.sequence.check(payload)
        self._pending.append(payload)
        if (
            payload["type"] in TERMINAL_TYPES
            or len(self._pending) >= self.max_batch
            or time.monotonic() - self._last_flush >= self.batch_window
        ):
            self.flush()

    def flush(self) -> None:
        """Write the pending events now: one INSERT statement, and once it is committed one
        stream entry holding the whole batch (``ids``, ``prev`` and ``data``, a JSON list)."""
        if not self._pending:
            return
        documents = [json.dumps(payload, separators=(",", ":")) for payload in self._pending]
        ids = _insert_events(self.run, self._pending, documents)
        entry = {
            "ids": ",".join(map(str, ids)),
            "prev": self.previous_id,
            "data": "[" + ",".join(documents) + "]",
        }
        self.previous_id = ids[-1]
        thread_id = self.run.thread_id
        transaction.on_commit(lambda: _publish(thread_id, entry))
        self._pending = []
        self._last_flush = time.monotonic()

    @property
    def started(self) -> bool:
        return self.sequence.started

    @property
    def ended(self) -> bool:
        return self.sequence.ended


def _insert_events(run: Run, payloads: list[dict[str, Any]], documents: list[str]) -> list[int]:
    """Insert a batch of events and return their ids, in order.

    On PostgreSQL, one raw multi-row ``INSERT`` on purpose: this is the hot path of every
    run. The ORM's bulk insert encodes each payload's JSON again and escapes it into an
    array parameter, which costs more than the rest of emitting; a statement per event
    costs PostgreSQL a statement's work per event. The ids come back in the order of the
    rows, as Django's own bulk insert relies on.
    """
    if db_connection.vendor != "postgresql":
        rows = RunEvent.objects.bulk_create(
            [
                RunEvent(thread_id=run.thread_id, run=run, type=p["type"], payload=p)
                for p in payloads
            ]
        )
        return [row.pk for row in rows]
    values = ", ".join(["(%s, %s, %s, %s::jsonb, now())"] * len(payloads))
    sql = (
        f"INSERT INTO {RunEvent._meta.db_table} (thread_id, run_id, type, payload, created_at) "
        f"VALUES {values} RETURNING id"
    )
    params: list[Any] = []
    for payload, document in zip(payloads, documents, strict=True):
        params += (run.thread_id, run.pk, payload["type"], document)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _publish(thread_id: uuid.UUID, entry: dict[str, Any]) -> None:
    try:
        redis_client().xadd(
            stream_key(thread_id),
            entry,  # type: ignore[arg-type]  # redis-py's annotation is narrower than its API
            maxlen=settings.AGENT_EVENTS_STREAM_MAXLEN,
            approximate=True,
        )
    except RedisError:
        # PostgreSQL has the events; readers fetch what the stream lacks from there.
        logger.warning("could not publish events %s to Redis", entry["ids"], exc_info=True)
