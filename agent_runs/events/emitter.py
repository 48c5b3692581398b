"""The durable event log: PostgreSQL holds every event, a Redis stream per thread fans it out.

docs/spec/sse-events-and-usage.md, section 1: events are persisted, then published to Redis.
The emitter checks each event and writes it: itself (``store.py``), or through its loop's
journal writer (``writer.py``).
"""

import asyncio
import contextlib
import copy
import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ag_ui.core import BaseEvent
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import Count, Max, Q
from django.utils import timezone
from redis.exceptions import RedisError

from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import TERMINAL_TYPES, EventSequence, encode_event
from agent_runs.events.store import HeldEvents, insert_events, redis_client, stream_key
from agent_runs.events.writer import BatchSource, journal_writer
from agent_runs.metrics import RUN_TIME_TO_FIRST_TOKEN, events_emitted
from agent_runs.models import Run, RunEvent

logger = logging.getLogger(__name__)


class RunEventEmitter(BatchSource):
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
        self.sequence = EventSequence()
        next_seq = 0
        if resume:
            written = RunEvent.objects.filter(run=run).aggregate(
                last=Max("seq"), terminal=Count("pk", filter=Q(type__in=TERMINAL_TYPES))
            )
            self.sequence.started = written["last"] is not None
            self.sequence.ended = written["terminal"] > 0
            next_seq = 0 if written["last"] is None else written["last"] + 1
        if previous_id is None:
            last = RunEvent.objects.filter(thread_id=run.thread_id).aggregate(last=Max("id"))
            previous_id = last["last"] or 0
        super().__init__(
            run=run,
            claim_token=claim_token,
            next_seq=next_seq,
            previous_id=previous_id,
            max_batch=max_batch,
        )
        self.batch_window = batch_window
        self._pending: list[dict[str, Any]] = []
        # The ordering rules' state before an optional held event (``hold_here``).
        self._unheld: EventSequence | None = None
        # The window opens with the emitter: a run's RUN_STARTED goes out with the router's
        # STEP_STARTED, flushed before its model call a few milliseconds later, in one write.
        self._last_flush = time.monotonic()
        self._loop = loop
        # When this emitter sent RUN_STARTED, until the run's first text (time to first token).
        self._started_at: float | None = None
        # Events held for a statement the job does not wait for (``hold_ahead``).
        self._ahead: _Ahead | None = None

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

    @property
    def held_ahead(self) -> bool:
        return self._ahead is not None

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

    def hold_here(
        self, events: list[BaseEvent], *, last_optional: bool = False, ending: bool = False
    ) -> HeldEvents:
        """Check events and hold them for one statement of the caller's that writes them
        with the rows they announce (``held_written``): their rows as the journal stores
        them. ``last_optional``: the statement may leave the last one out (a step that it
        decides not to start). ``ending``: the last one is the run's terminal event (the
        statement ends the run). For an emitter on a loop, whose writes are flushed
        (``flush_async()``) first, within ``rewound_on_failure``."""
        if self._loop is None or self.writing or self._pending:
            raise RuntimeError("an emitter on a loop whose writes are flushed writes here")
        self._unheld = None
        for index, event in enumerate(events):
            payload = encode_event(event)
            if (payload["type"] in TERMINAL_TYPES) != (ending and index == len(events) - 1):
                raise RuntimeError("a terminal event is held last, to end the run")
            if last_optional and index == len(events) - 1:
                self._unheld = copy.deepcopy(self.sequence)  # as if it never was, if left out
            self.sequence.check(payload)
            self._pending.append(payload)
        return HeldEvents(
            first_seq=self.next_seq,
            types=[payload["type"] for payload in self._pending],
            documents=[json.dumps(payload, separators=(",", ":")) for payload in self._pending],
            at=timezone.now(),
        )

    def held_written(self, held: HeldEvents, ids: list[int]) -> None:
        """The caller's statement wrote the held events, ``ids`` in order: they are published
        (once the caller's transaction commits, inside one). An optional last event it left
        out is as if never emitted."""
        documents = held.documents
        if len(ids) == len(self._pending) - 1 and self._unheld is not None:
            self.sequence = self._unheld
            del self._pending[-1]
            documents = documents[:-1]
        elif len(ids) != len(self._pending):
            raise RuntimeError(f"{len(ids)} of {len(self._pending)} held events written")
        for payload in self._pending:
            self._measure(payload["type"])
        self._publish_batch(ids, documents, held.at, committed=not db_connection.in_atomic_block)
        self._pending = []
        self._unheld = None
        self._last_flush = time.monotonic()

    def hold_ahead(self, events: list[BaseEvent], *, last_optional: bool = False) -> HeldEvents:
        """``hold_here`` on the loop, for a statement of a database thread's that the job
        does not wait for (``ahead_written``): what the job emits meanwhile comes after the
        held events and is written once they are (the journal writer leaves it waiting), or
        is dropped if the statement fails or leaves the last one out (``ahead_settled``).
        For an emitter on a loop, whose writes are flushed (``flush_async()``) first."""
        before = copy.deepcopy(self.sequence)
        held = self.hold_here(events, last_optional=last_optional)
        self._ahead = _Ahead(before=before, unheld=self._unheld, types=list(held.types))
        self._pending = []
        self._unheld = None
        return held

    def ahead_written(self, held: HeldEvents, ids: list[int]) -> None:
        """The statement wrote the events held ahead (``hold_ahead``), ``ids`` in order,
        committed: they are published (on the statement's database thread; the journal
        writer, which alone moves the emitter on otherwise, waits meanwhile)."""
        ahead = self._ahead
        if ahead is None:
            raise RuntimeError("no events held ahead")
        whole = len(ids) == len(held.documents)
        if not (whole or (len(ids) == len(held.documents) - 1 and ahead.unheld is not None)):
            raise RuntimeError(f"{len(ids)} of {len(held.documents)} held events written")
        documents = held.documents[: len(ids)]
        ahead.written = len(ids)
        self._publish_batch(ids, documents, held.at, committed=not db_connection.in_atomic_block)

    def ahead_settled(self, *, failed: bool = False) -> bool:
        """On the loop, once the statement of the events held ahead has ended (``failed``:
        with an error, its transaction rolled back): whether all of them were written. What
        the job emitted since is written next if they were; else it is dropped and the
        emitter is as if the events left out (all, when the statement failed) were never
        emitted."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            raise RuntimeError("no events held ahead")
        if failed:
            ahead.written = 0
        whole = ahead.written == len(ahead.types)
        if whole:
            for kind in ahead.types:
                self._measure(kind)
            if self._handed and self._loop is not None:
                journal_writer(self._loop).wake(self)
            return True
        self._handed.clear()
        if ahead.written:
            assert ahead.unheld is not None
            self.sequence = ahead.unheld
            for kind in ahead.types[: ahead.written]:
                self._measure(kind)
        else:
            self.sequence = ahead.before
        return False

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

    async def flush_async(self) -> None:
        """Wait until every event emitted so far is written (and published); raise what a
        write could not do (``RunNoLongerRunning`` when the run is no longer the job's)."""
        await self.settle_async()
        if self._failure is not None:
            raise self._failure

    async def settle_async(self) -> None:
        """``flush_async`` without raising: what was handed on is done with, however."""
        if self._loop is None:
            return
        if self.writing:
            await journal_writer(self._loop).written(self)

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

    def _insert(self, documents: list[str], at: datetime) -> list[int]:
        ids = insert_events(self.run, self.next_seq, self._pending, documents, self.claim_token, at)
        if not ids:
            raise RunNoLongerRunning(self.run.pk)
        return ids

    @property
    def started(self) -> bool:
        return self.sequence.started

    @property
    def ended(self) -> bool:
        return self.sequence.ended


@dataclass
class _Ahead:
    """Events held ahead (``hold_ahead``): the ordering rules' state before them and before
    the optional last one, their types, and how many of them the statement wrote."""

    before: EventSequence
    unheld: EventSequence | None
    types: list[str]
    written: int = 0


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
