"""A worker's journal writer: one per event loop, it writes what every emitter on the loop
hands on, many runs' events in one statement (docs/architecture.md, "The journal").

An emitter is a ``BatchSource`` to it: the run and claim its events are written under,
where its next batch goes, and the events it handed on. The emitter (``emitter.py``) builds
on that; this module never imports it.
"""

import asyncio
import json
import logging
import uuid
import weakref
from datetime import datetime
from typing import Any

import psycopg
import redis.asyncio
from django.conf import settings
from django.db import connection as db_connection
from django.utils import timezone
from redis.exceptions import RedisError

from agent_runs.db import db_call
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import epoch_microseconds
from agent_runs.events.store import insert_events, stream_key
from agent_runs.models import Run, RunEvent, Thread

logger = logging.getLogger(__name__)

# Rows in one round's statement.
_ROUND_MAX_ROWS = 2000

# A round's rows, one array parameter per column (binary: no quoting of the documents).
_ROUND_INSERT = (
    f"INSERT INTO {RunEvent._meta.db_table} "
    "(thread_id, run_id, seq, type, payload, created_at) "
    "SELECT v.thread_id, v.run_id, v.seq, v.type, v.payload::jsonb, %s "
    "FROM unnest(%b::uuid[], %b::bigint[], %b::uuid[], %b::integer[], %b::text[], %b::text[]) "
    "AS v(thread_id, run_id, claim_token, seq, type, payload) "
    "WHERE CASE WHEN v.claim_token IS NULL THEN EXISTS (SELECT 1 FROM "
    f"{Thread._meta.db_table} t WHERE t.id = v.thread_id FOR KEY SHARE) "
    "ELSE EXISTS (SELECT 1 FROM "
    f"{Run._meta.db_table} r WHERE r.id = v.run_id AND r.claim_token = v.claim_token "
    "AND r.status = %s FOR SHARE) END "
    "RETURNING id, run_id"
)


class BatchSource:
    """An emitter as the journal writer sees it: the run and claim its events are written
    under (``run``, ``claim_token``), where its next batch goes in the run and in the thread
    (``next_seq``, ``previous_id``), how many events one batch takes at most, and the events
    it handed on to the writer (``_handed``), of which the writer is writing ``_taken``, or
    what the last write could not do (``_failure``)."""

    def __init__(
        self,
        *,
        run: Run,
        claim_token: uuid.UUID | None,
        next_seq: int,
        previous_id: int,
        max_batch: int,
    ) -> None:
        self.run = run
        self.claim_token = claim_token
        self.next_seq = next_seq
        self.previous_id = previous_id
        self.max_batch = max_batch
        self._handed: list[dict[str, Any]] = []  # for the loop's journal writer, not taken yet
        self._taken = 0  # how many of those the writer is writing now
        self._failure: BaseException | None = None

    @property
    def held_ahead(self) -> bool:
        """Whether events the emitter handed on wait for a statement of its own that writes
        the events before them (``RunEventEmitter.hold_ahead``): the writer leaves them be."""
        return False

    @property
    def writing(self) -> bool:
        """Whether events of this emitter wait for the journal writer or are being written."""
        return bool(self._handed or self._taken)

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
        self._waiting: dict[int, BatchSource] = {}
        self._wake = asyncio.Event()
        # While the writer waits for its next round's time: set to start the round at once.
        self._hurry: asyncio.Future[None] | None = None
        self._round_done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._redis: Any = None

    def wake(self, emitter: BatchSource) -> None:
        """``emitter`` has events to write (called on the loop)."""
        self._waiting[id(emitter)] = emitter
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._serve())

    async def written(self, emitter: BatchSource) -> None:
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

    def _take(self) -> list[tuple[BatchSource, list[dict[str, Any]]]]:
        batches, rows = [], 0
        for emitter in self._waiting.values():
            if emitter._failure is not None:
                emitter._handed.clear()
                continue
            if emitter.held_ahead:
                continue  # woken again once the events before them are written
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
        self._waiting = {
            key: e for key, e in self._waiting.items() if e._handed and not e.held_ahead
        }
        return batches

    async def _write(self, batches: list[tuple[BatchSource, list[dict[str, Any]]]]) -> None:
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
                        insert_events,
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
        batches: list[tuple[BatchSource, list[dict[str, Any]]]],
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


def _connection_kwargs() -> dict[str, Any]:
    """What Django connects with (its ``OPTIONS`` included, so ``sslmode`` and the like
    hold here too), but its synchronous cursor class."""
    kwargs = dict(db_connection.get_connection_params())
    kwargs.pop("cursor_factory", None)
    return kwargs
