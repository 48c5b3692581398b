"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

docs/spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
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
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import Count, Max, Q
from redis.exceptions import RedisError

from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import TERMINAL_TYPES, EventSequence, encode_event
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
    in PostgreSQL with their ordinal in the run (``seq``), and added to the thread's Redis
    stream once the rows are committed.

    A job's emitter is fenced on its claim (``claim_token``): each write stores its rows only
    while the run is still running under that claim, checked in the same statement, so a job
    that lost its run (cancelled, or failed by the sweeper) writes nothing more and stops
    (``RunNoLongerRunning``). The services that end a run outside its job write unfenced, once
    they have ended it.

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
        claim_token: uuid.UUID | None = None,
        batch_window: float = 0.005,
        max_batch: int = 500,
    ) -> None:
        """``resume``: continue a run whose events were emitted elsewhere (a job that died),
        so only its ending is left to emit. ``previous_id``: the thread's last event id, when
        the caller has read it already. ``claim_token``: the claim of the job that emits."""
        self.run = run
        self.claim_token = claim_token
        self.sequence = EventSequence()
        self.next_seq = 0
        if resume:
            written = RunEvent.objects.filter(run=run).aggregate(
                last=Max("seq"), terminal=Count("pk", filter=Q(type__in=TERMINAL_TYPES))
            )
            self.sequence.started = written["last"] is not None
            self.sequence.ended = written["terminal"] > 0
            self.next_seq = 0 if written["last"] is None else written["last"] + 1
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
        stream entry holding the whole batch (``ids``, ``prev``, ``seq`` and ``data``, a JSON
        list).
        A connection the database cut is replaced and the write tried once more (the fence
        makes that safe); a job whose run is no longer its own raises ``RunNoLongerRunning``."""
        if not self._pending:
            return
        documents = [json.dumps(payload, separators=(",", ":")) for payload in self._pending]
        try:
            ids = self._insert(documents)
        except (InterfaceError, OperationalError):
            if db_connection.in_atomic_block:
                raise  # the transaction is lost with its connection: the caller's to handle
            logger.warning("run %s: writing events failed; reconnecting", self.run.pk)
            db_connection.close()
            ids = self._insert(documents)
        entry = {
            "ids": ",".join(map(str, ids)),
            "prev": self.previous_id,
            "seq": self.next_seq,  # the first event's ordinal in its run; the rest follow
            "data": "[" + ",".join(documents) + "]",
        }
        self.previous_id = ids[-1]
        self.next_seq += len(ids)
        thread_id = self.run.thread_id
        transaction.on_commit(lambda: _publish(thread_id, entry))
        self._pending = []
        self._last_flush = time.monotonic()

    def _insert(self, documents: list[str]) -> list[int]:
        ids = _insert_events(self.run, self.next_seq, self._pending, documents, self.claim_token)
        if not ids:
            raise RunNoLongerRunning(self.run.pk)
        return ids

    @property
    def started(self) -> bool:
        return self.sequence.started

    @property
    def ended(self) -> bool:
        return self.sequence.ended


def _insert_events(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    documents: list[str],
    claim_token: uuid.UUID | None,
) -> list[int]:
    """Insert a batch of events and return their ids, in order; none when ``claim_token``
    is given and the run is no longer running under it.

    On PostgreSQL, one raw multi-row ``INSERT`` on purpose: this is the hot path of every
    run. The ORM's bulk insert encodes each payload's JSON again and escapes it into an
    array parameter, which costs more than the rest of emitting; a statement per event
    costs PostgreSQL a statement's work per event. The fence is part of the statement and
    takes a share lock on the run's row, so a service ending the run (which locks the row
    for update) writes its own events after these, or these are not written at all. The
    ids come back in the order of the rows, as Django's own bulk insert relies on.
    """
    if db_connection.vendor != "postgresql":
        return _insert_events_portable(run, first_seq, payloads, claim_token)
    rows = ", ".join(["(%s::integer, %s, %s::jsonb)"] * len(payloads))
    params: list[Any] = [run.thread_id, run.pk]
    for offset, (payload, document) in enumerate(zip(payloads, documents, strict=True)):
        params += (first_seq + offset, payload["type"], document)
    fence = ""
    if claim_token is not None:
        fence = (
            f"WHERE EXISTS (SELECT 1 FROM {Run._meta.db_table} r WHERE r.id = %s "
            "AND r.claim_token = %s AND r.status = %s FOR SHARE)"
        )
        params += (run.pk, claim_token, Run.Status.RUNNING.value)
    sql = (
        f"INSERT INTO {RunEvent._meta.db_table} "
        "(thread_id, run_id, seq, type, payload, created_at) "
        "SELECT %s, %s, v.seq, v.type, v.payload, now() "
        f"FROM (VALUES {rows}) AS v(seq, type, payload) {fence} "
        "RETURNING id"
    )
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _insert_events_portable(
    run: Run, first_seq: int, payloads: list[dict[str, Any]], claim_token: uuid.UUID | None
) -> list[int]:
    """The same on SQLite (the quick start), whose write lock makes check-then-insert in one
    transaction as safe as the fenced statement."""
    with transaction.atomic():
        if (
            claim_token is not None
            and not Run.objects.filter(
                pk=run.pk, claim_token=claim_token, status=Run.Status.RUNNING
            ).exists()
        ):
            return []
        rows = RunEvent.objects.bulk_create(
            [
                RunEvent(
                    thread_id=run.thread_id,
                    run=run,
                    seq=first_seq + offset,
                    type=p["type"],
                    payload=p,
                )
                for offset, p in enumerate(payloads)
            ]
        )
    return [row.pk for row in rows]


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
