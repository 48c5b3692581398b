"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

docs/spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
"""

import asyncio
import contextlib
import copy
import json
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import cache
from typing import Any

import psycopg
import redis
import redis.asyncio
from ag_ui.core import BaseEvent
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import Count, Max, Q
from django.utils import timezone
from redis.exceptions import RedisError

from agent_runs.db import db_call
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import (
    TERMINAL_TYPES,
    EventSequence,
    encode_event,
    epoch_microseconds,
)
from agent_runs.metrics import RUN_TIME_TO_FIRST_TOKEN, events_emitted
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

    ``loop``: a job's emitter writes as it goes, through its loop's ``JournalWriter``, which
    writes the events every run on that loop has emitted since its last write in one
    statement and adds them to their threads' streams in one Redis round trip: while one
    write is in flight the models' next chunks are read, and whatever came meanwhile goes in
    the next, so nothing waits for a window, and many runs' events take few statements. Its
    terminal event is written by the caller, from a database thread, once everything before
    it is (``await flush_async()`` first), so it can share the caller's transaction. A write
    that could not be made (the run is no longer the job's, the database is gone) is raised
    by the next ``emit`` or ``flush_async``.
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
        self._handed: list[dict[str, Any]] = []  # for the loop's journal writer, not taken yet
        self._taken = 0  # how many of those the writer is writing now
        self._deferred: list[asyncio.Future[None]] = []
        self._failure: BaseException | None = None
        # When this emitter sent RUN_STARTED, until the run's first text (time to first token).
        self._started_at: float | None = None

    def emit(self, event: BaseEvent) -> None:
        payload = encode_event(event)
        if self._loop is not None and payload["type"] in TERMINAL_TYPES and self.writing:
            raise RuntimeError("flush_async() before emitting the terminal event")
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
        events_emitted(event_type).inc()
        if event_type == "RUN_STARTED":
            self._started_at = time.monotonic()
        elif event_type == "TEXT_MESSAGE_CONTENT" and self._started_at is not None:
            RUN_TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self._started_at)
            self._started_at = None

    def _hand_on(self, loop: asyncio.AbstractEventLoop, payload: dict[str, Any]) -> None:
        if self._failure is not None:
            raise self._failure
        if payload["type"] in TERMINAL_TYPES:
            # Written here, on the caller's connection, after the rest (``emit`` checked),
            # with the events held for it: the caller may end the run in the same
            # transaction (from a database thread).
            self._pending.append(payload)
            self._write_pending()
            return
        self._handed.append(payload)
        journal_writer(loop).wake(self)

    def emit_with_end(self, event: BaseEvent) -> None:
        """Emit an event that is written with the run's terminal event, which the caller
        emits next on the same thread (a database thread, in the transaction that ends the
        run): the last stage's ``STEP_FINISHED``, in the transaction that records its step's
        end. For an emitter on a loop, whose writes are flushed (``flush_async()``) first."""
        self._hold(event)

    def emit_here(self, events: list[BaseEvent]) -> None:
        """Emit events and write them at once on the caller's connection (a database thread,
        inside the transaction that records what they announce: a step's start or end), to
        be published when it commits. A write of its own saved: the events share the
        transaction's commit. For an emitter on a loop, whose writes are flushed
        (``flush_async()``) first; a transaction that fails after it leaves the emitter
        past the events it wrote, so it is the job's last (the job fails its run)."""
        for event in events:
            self._hold(event)
        self._write_pending()

    @contextlib.contextmanager
    def rewound_on_failure(self) -> Iterator[None]:
        """Around a transaction that writes events here (``emit_here``): when it fails (its
        statements, or its commit), the emitter goes back to where it was, so that the
        transaction may be tried again (on a new connection)."""
        saved = (self.next_seq, self.previous_id, copy.deepcopy(self.sequence))
        try:
            yield
        except BaseException:
            self.next_seq, self.previous_id, self.sequence = saved
            self._pending = []
            raise

    def _hold(self, event: BaseEvent) -> None:
        if self._loop is None or self.writing:
            raise RuntimeError("an emitter on a loop whose writes are flushed writes here")
        payload = encode_event(event)
        if payload["type"] in TERMINAL_TYPES:
            raise RuntimeError("the terminal event is emitted with emit()")
        self.sequence.check(payload)
        self._measure(payload["type"])
        self._pending.append(payload)

    @property
    def writing(self) -> bool:
        """Whether events of this emitter wait for the journal writer or are being written."""
        return bool(self._handed or self._taken)

    def defer(self, task: Callable[[], None]) -> None:
        """Run ``task`` (a job's bookkeeping that need not hold the model up: its usage
        records) on a database thread of the loop's executor; at once for an emitter with no
        loop. ``flush_async()`` waits for it."""
        if self._loop is None:
            task()
            return
        self._deferred.append(self._loop.run_in_executor(None, _logged(task)))

    async def flush_async(self) -> None:
        """Wait until every event emitted so far is written (and published) and every
        deferred task has run; raise what a write could not do (``RunNoLongerRunning`` when
        the run is no longer the job's)."""
        await self.settle_async()
        if self._failure is not None:
            raise self._failure

    async def settle_async(self) -> None:
        """``flush_async`` without raising: what was handed on is done with, however."""
        if self._loop is None:
            return
        if self.writing:
            await journal_writer(self._loop).written(self)
        while self._deferred:
            deferred, self._deferred = self._deferred, []
            await asyncio.gather(*deferred, return_exceptions=True)

    def flush(self) -> None:
        """Write the pending events now: one INSERT statement, and once it is committed one
        stream entry holding the whole batch (``ids``, ``prev``, ``seq`` and ``data``, a JSON
        list). For an emitter with no loop (an emitter on a loop: ``flush_async``).
        A connection the database cut is replaced and the write tried once more (the fence
        makes that safe); a job whose run is no longer its own raises ``RunNoLongerRunning``."""
        if self._loop is not None:
            raise RuntimeError("an emitter on a loop is flushed with flush_async()")
        self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        documents = [json.dumps(payload, separators=(",", ":")) for payload in self._pending]
        at = timezone.now()
        try:
            ids = self._insert(documents, at)
        except (InterfaceError, OperationalError):
            if db_connection.in_atomic_block:
                raise  # the transaction is lost with its connection: the caller's to handle
            logger.warning("run %s: writing events failed; reconnecting", self.run.pk)
            db_connection.close()
            ids = self._insert(documents, at)
        self._publish_batch(ids, documents, at, committed=False)
        self._pending = []
        self._last_flush = time.monotonic()

    def _publish_batch(
        self, ids: list[int], documents: list[str], at: datetime, *, committed: bool
    ) -> None:
        """Add a written batch to the thread's stream: at once when its statement committed
        on its own (``committed``), else when the caller's transaction commits."""
        entry = self._entry(ids, documents, at)
        thread_id = self.run.thread_id
        if committed:
            _publish(thread_id, entry)
        else:
            transaction.on_commit(lambda: _publish(thread_id, entry))

    def _entry(self, ids: list[int], documents: list[str], at: datetime) -> dict[str, Any]:
        """The stream entry of a written batch (``ids``, ``prev``, ``seq``, ``at``, the time
        its rows say they were written, and ``data``, a JSON list); the emitter moves on past
        it."""
        entry = {
            "ids": ",".join(map(str, ids)),
            "prev": self.previous_id,
            "seq": self.next_seq,  # the first event's ordinal in its run; the rest follow
            "at": epoch_microseconds(at),
            "data": "[" + ",".join(documents) + "]",
        }
        self.previous_id = ids[-1]
        self.next_seq += len(ids)
        return entry

    def _insert(self, documents: list[str], at: datetime) -> list[int]:
        ids = _insert_events(
            self.run, self.next_seq, self._pending, documents, self.claim_token, at
        )
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
    at: datetime,
) -> list[int]:
    """Insert a batch of events written ``at`` and return their ids, in order; none when
    ``claim_token`` is given and the run is no longer running under it.

    On PostgreSQL, one raw multi-row ``INSERT`` on purpose: this is the hot path of every
    run. The ORM's bulk insert encodes each payload's JSON again and escapes it into an
    array parameter, which costs more than the rest of emitting; a statement per event
    costs PostgreSQL a statement's work per event. The fence is part of the statement and
    takes a share lock on the run's row, so a service ending the run (which locks the row
    for update) writes its own events after these, or these are not written at all. The
    ids come back in the order of the rows, as Django's own bulk insert relies on.
    """
    if db_connection.vendor != "postgresql":
        return _insert_events_portable(run, first_seq, payloads, claim_token, at)
    sql, params = _insert_statement(run, first_seq, payloads, documents, claim_token, at)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _insert_statement(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    documents: list[str],
    claim_token: uuid.UUID | None,
    at: datetime,
) -> tuple[str, list[Any]]:
    """The fenced multi-row INSERT of ``_insert_events`` and its parameters."""
    rows = ", ".join(["(%s::integer, %s, %s::jsonb)"] * len(payloads))
    params: list[Any] = [run.thread_id, run.pk, at]
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
        "SELECT %s, %s, v.seq, v.type, v.payload, %s "
        f"FROM (VALUES {rows}) AS v(seq, type, payload) {fence} "
        "RETURNING id"
    )
    return sql, params


# Rows in one round's statement.
_ROUND_MAX_ROWS = 2000

# A round's rows, one array parameter per column (binary: no quoting of the documents).
_ROUND_INSERT = (
    f"INSERT INTO {RunEvent._meta.db_table} "
    "(thread_id, run_id, seq, type, payload, created_at) "
    "SELECT v.thread_id, v.run_id, v.seq, v.type, v.payload::jsonb, %s "
    "FROM unnest(%b::uuid[], %b::bigint[], %b::uuid[], %b::integer[], %b::text[], %b::text[]) "
    "AS v(thread_id, run_id, claim_token, seq, type, payload) "
    "WHERE v.claim_token IS NULL OR EXISTS (SELECT 1 FROM "
    f"{Run._meta.db_table} r WHERE r.id = v.run_id AND r.claim_token = v.claim_token "
    "AND r.status = %s FOR SHARE) "
    "RETURNING id, run_id"
)


class JournalWriter:
    """Writes the events every emitter on one event loop hands on (a worker's runs): each
    round takes all that is waiting, of every run, and writes it in one fenced ``INSERT``
    on the writer's own connection (autocommit), then adds each run's batch to its thread's
    stream in one Redis pipeline. A round starts as soon as the one before it ends, but,
    when that one carried more than one run's events, no sooner than
    ``AGENT_EVENTS_WRITE_INTERVAL`` after it started (unless a job waits for its events:
    ``written``), so an event waits at most that, or a round's time, beyond its own write,
    and the more runs are in flight the more each statement carries (docs/architecture.md,
    "The journal")."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: dict[int, RunEventEmitter] = {}
        self._wake = asyncio.Event()
        # While the writer waits for its next round's time: set to start the round at once.
        self._hurry: asyncio.Future[None] | None = None
        self._round_done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._redis: Any = None

    def wake(self, emitter: RunEventEmitter) -> None:
        """``emitter`` has events to write (called on the loop)."""
        self._waiting[id(emitter)] = emitter
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._serve())

    async def written(self, emitter: RunEventEmitter) -> None:
        """Wait until what ``emitter`` handed on so far is written, or has failed. A job
        waits for this at a stage's end (its answer stored after its events): the round
        starts at once, not at its time."""
        if self._hurry is not None and not self._hurry.done():
            self._hurry.set_result(None)
        async with self._round_done:
            await self._round_done.wait_for(
                lambda: not emitter.writing or emitter._failure is not None
            )

    async def _serve(self) -> None:
        last_round = 0.0
        shared = False  # whether the last round carried more than one run's events
        while True:
            await self._wake.wait()
            # Under load, rounds at most every AGENT_EVENTS_WRITE_INTERVAL: what the runs
            # emit meanwhile joins this one (a token every 20 ms from each of 30 runs: a few
            # rounds, not a statement per token). A round of one run's events shares its
            # cost with no other run: the next goes as soon as it ends.
            wait = last_round + settings.AGENT_EVENTS_WRITE_INTERVAL - self._loop.time()
            if shared and wait > 0:
                await self._round_time(wait)
            last_round = self._loop.time()
            self._wake.clear()
            batches = self._take()
            shared = len(batches) > 1
            if not batches:
                continue
            try:
                await self._write(batches)
            except Exception as exc:  # every emitter of the round learns of it
                logger.warning("writing events failed", exc_info=True)
                for emitter, _ in batches:
                    emitter._failure = exc
                    emitter._handed.clear()
            finally:
                for emitter, _ in batches:
                    emitter._taken = 0
                async with self._round_done:
                    self._round_done.notify_all()

    async def _round_time(self, wait: float) -> None:
        """Wait ``wait`` seconds, or less when a job waits for its events (``written``)."""
        hurry = self._hurry = self._loop.create_future()
        timer = self._loop.call_later(wait, _resolve, hurry)
        try:
            await hurry
        finally:
            timer.cancel()
            self._hurry = None

    def _take(self) -> list[tuple[RunEventEmitter, list[dict[str, Any]]]]:
        batches, rows = [], 0
        for emitter in self._waiting.values():
            if emitter._failure is not None:
                emitter._handed.clear()
                continue
            if rows >= _ROUND_MAX_ROWS:
                self._wake.set()  # the rest in the next round
                break
            batch = emitter._handed[: min(emitter.max_batch, _ROUND_MAX_ROWS - rows)]
            rows += len(batch)
            del emitter._handed[: len(batch)]
            if emitter._handed:
                self._wake.set()  # the rest in the next round
            emitter._taken = len(batch)
            batches.append((emitter, batch))
        self._waiting = {key: e for key, e in self._waiting.items() if e._handed}
        return batches

    async def _write(self, batches: list[tuple[RunEventEmitter, list[dict[str, Any]]]]) -> None:
        documents = [
            [json.dumps(payload, separators=(",", ":")) for payload in batch]
            for _, batch in batches
        ]
        at = timezone.now()  # the round's rows, and its stream entries, say so
        if db_connection.vendor == "postgresql":
            written = await self._insert(batches, documents, at)
        else:  # the quick start's SQLite: the ORM, each run's batch on a database thread
            written = []
            for (emitter, batch), docs in zip(batches, documents, strict=True):
                written.append(
                    await db_call(
                        _insert_events,
                        emitter.run,
                        emitter.next_seq,
                        batch,
                        docs,
                        emitter.claim_token,
                        at,
                    )
                )
        entries = []
        for (emitter, _), docs, ids in zip(batches, documents, written, strict=True):
            if not ids:
                emitter._failure = RunNoLongerRunning(emitter.run.pk)
                emitter._handed.clear()
                continue
            entries.append((emitter.run.thread_id, emitter._entry(ids, docs, at)))
        await self._publish(entries)

    async def _insert(
        self,
        batches: list[tuple[RunEventEmitter, list[dict[str, Any]]]],
        documents: list[list[str]],
        at: datetime,
    ) -> list[list[int]]:
        """One INSERT for every batch, each row fenced on its own run's claim; the ids of
        each batch, in order (none for a run no longer its job's).

        The rows go as one array per column (``unnest``), so the statement's text is the
        same every round: psycopg parses it once and PostgreSQL prepares it once, where a
        ``VALUES`` list of placeholders was a new statement of every round's size to parse
        (about 6% of a worker's CPU)."""
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [])
        thread_ids, run_ids, claim_tokens, seqs, types, payloads = columns
        for (emitter, batch), docs in zip(batches, documents, strict=True):
            run = emitter.run
            for offset, (payload, document) in enumerate(zip(batch, docs, strict=True)):
                thread_ids.append(run.thread_id)
                run_ids.append(run.pk)
                claim_tokens.append(emitter.claim_token)
                seqs.append(emitter.next_seq + offset)
                types.append(payload["type"])
                payloads.append(document)
        params: list[Any] = [at, *columns, Run.Status.RUNNING.value]
        result = await self._execute(_ROUND_INSERT, params)
        ids: dict[int, list[int]] = {}
        for event_id, run_pk in result:
            ids.setdefault(run_pk, []).append(event_id)
        return [ids.get(emitter.run.pk, []) for emitter, _ in batches]

    async def _execute(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Run a statement on the writer's connection; a connection the database cut is
        replaced and the statement tried once more (the fence makes that safe)."""
        for attempt in range(2):
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = await psycopg.AsyncConnection.connect(
                        **_connection_kwargs(), autocommit=True
                    )
                cursor = await self._connection.execute(sql, params)
                return await cursor.fetchall()
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if self._connection is not None:
                    await self._connection.close()
                if attempt:
                    raise
                logger.warning("writing events failed; reconnecting")
        raise AssertionError("unreachable")

    async def _publish(self, entries: list[tuple[uuid.UUID, dict[str, Any]]]) -> None:
        """Add each written batch to its thread's stream, in one round trip."""
        if not entries:
            return
        try:
            if self._redis is None:
                self._redis = redis.asyncio.Redis.from_url(settings.REDIS_URL)
            async with self._redis.pipeline(transaction=False) as pipeline:
                for thread_id, entry in entries:
                    pipeline.xadd(
                        stream_key(thread_id),
                        entry,
                        maxlen=settings.AGENT_EVENTS_STREAM_MAXLEN,
                        approximate=True,
                    )
                await pipeline.execute()
        except RedisError:
            # PostgreSQL has the events; readers fetch what the streams lack from there.
            logger.warning(
                "could not publish %d batches of events to Redis", len(entries), exc_info=True
            )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()
        if self._redis is not None:
            await self._redis.aclose()


_WRITERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, JournalWriter]"
_WRITERS = weakref.WeakKeyDictionary()


def journal_writer(loop: asyncio.AbstractEventLoop) -> JournalWriter:
    """The loop's journal writer (made on first use)."""
    writer = _WRITERS.get(loop)
    if writer is None:
        writer = _WRITERS[loop] = JournalWriter(loop)
    return writer


async def close_event_connection() -> None:
    """Close the running loop's journal writer, if it has one (the worker stops)."""
    writer = _WRITERS.pop(asyncio.get_running_loop(), None)
    if writer is not None:
        await writer.close()


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


def _logged(task: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            task()
        except Exception:  # a task reports its own failures; this keeps the others going
            logger.exception("a deferred task of a job failed")

    return run


def _connection_kwargs() -> dict[str, Any]:
    """What Django connects with (its ``OPTIONS`` included, so ``sslmode`` and the like
    hold here too), but its synchronous cursor class."""
    kwargs = dict(db_connection.get_connection_params())
    kwargs.pop("cursor_factory", None)
    return kwargs


def _insert_events_portable(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    claim_token: uuid.UUID | None,
    at: datetime,
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
                    created_at=at,
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
