"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

docs/spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
"""

import asyncio
import json
import logging
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable
from functools import cache
from typing import Any

import psycopg
import redis
from ag_ui.core import BaseEvent
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import Count, Max, Q
from redis.exceptions import RedisError

from agent_runs.db import db_call
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import TERMINAL_TYPES, EventSequence, encode_event
from agent_runs.metrics import EVENTS_EMITTED, RUN_TIME_TO_FIRST_TOKEN
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

    ``loop``: a job's emitter writes as it goes, from a task on the event loop its reply
    runs on (with an asynchronous connection of that loop's, on PostgreSQL): while one
    write is in flight the model's next chunks are read, and whatever came meanwhile goes
    in the next write, so nothing waits for a window and a fast model's events take few
    statements. (A thread would not do: the job's thread, busy with a fast model, keeps
    the interpreter lock from it for hundreds of milliseconds.) Its terminal event is
    written by the caller, on the caller's connection, once everything before it is (so it
    can share the caller's transaction; flush before opening that transaction, since on
    SQLite a write in flight waits for its lock). A write that could not be made (the run is no
    longer the job's, the database is gone) is raised by the next ``emit`` or ``flush``.
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
        loop: asyncio.AbstractEventLoop | None = None,
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
        self._loop = loop
        self._handed: list[dict[str, Any]] = []  # for the loop's writing task, not taken yet
        self._writing: asyncio.Task[None] | None = None
        self._failure: Exception | None = None
        # When this emitter sent RUN_STARTED, until the run's first text (time to first token).
        self._started_at: float | None = None

    def emit(self, event: BaseEvent) -> None:
        payload = encode_event(event)
        self.sequence.check(payload)
        self._measure(payload["type"])
        if self._loop is not None:
            self._hand_on(self._loop, payload)
            return
        self._pending.append(payload)
        if (
            payload["type"] in TERMINAL_TYPES
            or len(self._pending) >= self.max_batch
            or time.monotonic() - self._last_flush >= self.batch_window
        ):
            self.flush()

    def _measure(self, event_type: str) -> None:
        EVENTS_EMITTED.labels(event_type).inc()
        if event_type == "RUN_STARTED":
            self._started_at = time.monotonic()
        elif event_type == "TEXT_MESSAGE_CONTENT" and self._started_at is not None:
            RUN_TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self._started_at)
            self._started_at = None

    def _hand_on(self, loop: asyncio.AbstractEventLoop, payload: dict[str, Any]) -> None:
        if self._failure is not None:
            raise self._failure
        if payload["type"] in TERMINAL_TYPES:
            # Written here, after the rest: the caller may end the run in the same transaction.
            self.flush()
            self._pending = [payload]
            self._write_pending()
            return
        self._handed.append(payload)
        if self._writing is None or self._writing.done():
            # Runs with the loop: now, when the job is in a reply; else once it drives the
            # loop again (its next model call, or ``flush()``).
            self._writing = loop.create_task(self._write_handed())

    @property
    def writing(self) -> bool:
        """Whether a write is in flight (a reply lets the loop turn so it can finish)."""
        return self._writing is not None and not self._writing.done()

    async def _write_handed(self) -> None:
        """Write what was handed on, a statement at a time, each with all that came while
        the one before was in flight."""
        while self._handed and self._failure is None:
            batch = self._handed[: self.max_batch]
            del self._handed[: self.max_batch]
            try:
                await self._write_async(batch)
            except Exception as exc:  # raised to the job by its next emit or flush
                self._failure = exc
                self._handed.clear()

    async def _write_async(self, batch: list[dict[str, Any]]) -> None:
        documents = [json.dumps(payload, separators=(",", ":")) for payload in batch]
        if db_connection.vendor == "postgresql":
            ids = await _insert_events_async(self, batch, documents)
        else:  # the quick start's SQLite: the ORM, on a thread (closed after)
            ids = await db_call(
                _insert_events, self.run, self.next_seq, batch, documents, self.claim_token
            )
        if not ids:
            raise RunNoLongerRunning(self.run.pk)
        self._publish_batch(ids, documents, committed=True)

    def defer(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the process's bookkeeping thread (a job's bookkeeping that need not
        hold the model up); at once for an emitter that writes as it goes. ``flush()`` and
        ``settle()`` wait for it."""
        if self._loop is None:
            task()
        else:
            bookkeeping().submit(task)

    def settle(self) -> None:
        """Finish what was handed on (whatever comes of it) and the deferred tasks."""
        if self._loop is not None:
            if self._writing is not None and not self._writing.done():
                self._loop.run_until_complete(self._writing)
            bookkeeping().drain()

    def flush(self) -> None:
        """Write the pending events now: one INSERT statement, and once it is committed one
        stream entry holding the whole batch (``ids``, ``prev``, ``seq`` and ``data``, a JSON
        list). An emitter that writes as it goes returns once everything handed on (and
        every deferred task) is done. From synchronous code only.
        A connection the database cut is replaced and the write tried once more (the fence
        makes that safe); a job whose run is no longer its own raises ``RunNoLongerRunning``."""
        if self._loop is not None:
            self.settle()
            if self._failure is not None:
                raise self._failure
            return
        self._write_pending()

    def _write_pending(self) -> None:
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
        self._publish_batch(ids, documents, committed=False)
        self._pending = []
        self._last_flush = time.monotonic()

    def _publish_batch(self, ids: list[int], documents: list[str], *, committed: bool) -> None:
        """Add a written batch to the thread's stream: at once when its statement committed
        on its own (``committed``), else when the caller's transaction commits."""
        entry = {
            "ids": ",".join(map(str, ids)),
            "prev": self.previous_id,
            "seq": self.next_seq,  # the first event's ordinal in its run; the rest follow
            "data": "[" + ",".join(documents) + "]",
        }
        self.previous_id = ids[-1]
        self.next_seq += len(ids)
        thread_id = self.run.thread_id
        if committed:
            _publish(thread_id, entry)
        else:
            transaction.on_commit(lambda: _publish(thread_id, entry))

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


class Bookkeeping:
    """The thread that does the bookkeeping a job defers (its usage records), in order, on
    a database connection of its own, kept from one job to the next."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._tasks: deque[Callable[[], None]] = deque()
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(self, task: Callable[[], None]) -> None:
        """Queue ``task``."""
        with self._ready:
            self._tasks.append(task)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name="run-bookkeeping", daemon=True
                )
                self._thread.start()
            self._ready.notify()

    def close_connection(self) -> None:
        """Give back the thread's database connection (when the worker stops)."""
        self.submit(lambda: db_connection.close())
        self.drain()

    def drain(self) -> None:
        """Wait until every task queued so far has run."""
        with self._ready:
            while self._tasks or self._busy:
                self._ready.wait()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._tasks:
                    self._ready.wait()
                task = self._tasks.popleft()
                self._busy = True
            try:
                task()
            except Exception:  # a task reports its own failures; this keeps the thread
                logger.exception("a deferred task of a job failed")
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()


@cache
def bookkeeping() -> Bookkeeping:
    """The process's bookkeeping thread (started with its first task)."""
    return Bookkeeping()


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
    sql, params = _insert_statement(run, first_seq, payloads, documents, claim_token)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _insert_statement(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    documents: list[str],
    claim_token: uuid.UUID | None,
) -> tuple[str, list[Any]]:
    """The fenced multi-row INSERT of ``_insert_events`` and its parameters."""
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
    return sql, params


_ASYNC_CONNECTIONS: (
    "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, psycopg.AsyncConnection[Any]]"
)
_ASYNC_CONNECTIONS = weakref.WeakKeyDictionary()


async def _insert_events_async(
    emitter: RunEventEmitter, payloads: list[dict[str, Any]], documents: list[str]
) -> list[int]:
    """``_insert_events`` on the loop's own connection (autocommit: each statement commits
    alone); a connection the database cut is replaced and the write tried once more."""
    sql, params = _insert_statement(
        emitter.run, emitter.next_seq, payloads, documents, emitter.claim_token
    )
    loop = asyncio.get_running_loop()
    for attempt in range(2):
        connection = _ASYNC_CONNECTIONS.get(loop)
        try:
            if connection is None or connection.closed:
                connection = _ASYNC_CONNECTIONS[loop] = await psycopg.AsyncConnection.connect(
                    **_connection_kwargs(), autocommit=True
                )
            cursor = await connection.execute(sql, params)
            return [row[0] for row in await cursor.fetchall()]
        except (psycopg.OperationalError, psycopg.InterfaceError):
            if connection is not None:
                await connection.close()
            if attempt:
                raise
            logger.warning("run %s: writing events failed; reconnecting", emitter.run.pk)
    raise AssertionError("unreachable")


async def close_event_connection() -> None:
    """Close the running loop's event-writing connection, if it has one (the worker stops)."""
    connection = _ASYNC_CONNECTIONS.pop(asyncio.get_running_loop(), None)
    if connection is not None:
        await connection.close()


def _connection_kwargs() -> dict[str, Any]:
    """What Django connects with (its ``OPTIONS`` included, so ``sslmode`` and the like
    hold here too), but its synchronous cursor class."""
    kwargs = dict(db_connection.get_connection_params())
    kwargs.pop("cursor_factory", None)
    return kwargs


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
