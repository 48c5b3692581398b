"""Reads of the event journal: where a client's stream starts, pages of events, and the
message ids its events streamed. The journal's own package holds them (codec → reads →
emitter → hub → follow → wait)."""

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Q
from django.http import Http404

from agent_runs.db import db_value
from agent_runs.events.codec import TERMINAL_TYPES
from agent_runs.models import Message, Run, RunEvent, Thread
from agent_runs.selectors.runs import thread_get_for_user


@dataclass(frozen=True)
class EventStreamStart:
    """Where a client's event stream starts and which run's terminal event ends it."""

    after_id: int
    run_id: str | None  # the chosen run (the latest by default), whose terminal event ends it
    run_ended: bool  # that terminal event is already behind the cursor
    await_run_start: bool = False  # events before that run's RUN_STARTED are not sent


def event_stream_start(
    *,
    user: AbstractBaseUser,
    thread_id: uuid.UUID,
    after_id: int | None,
    run_id: str | None = None,
) -> EventStreamStart:
    """Where the caller's stream of a thread starts (docs/spec/sse-events-and-usage.md, section 2):
    after ``Last-Event-ID``, or without a cursor at the chosen run's ``RUN_STARTED`` (the
    latest run's unless ``run_id`` names one), waiting for it while the run is queued: a
    stream never starts mid-run. A thread that is not the caller's, or a run it does not
    have, is a 404. One query; every stream that opens asks this, so it is SQL written out
    (the ORM took longer to build it than the database to answer it)."""
    params: list[Any] = [
        *sorted(TERMINAL_TYPES),
        Thread._meta.pk.get_db_prep_value(thread_id, connection),
        user.pk,
    ]
    sql = _EVENT_STREAM_START_SQL.format(run_filter="AND r.run_id = %s" if run_id else "")
    if run_id:
        params.append(run_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        latest = cursor.fetchone()
    if latest is None:
        if run_id:
            raise Http404
        thread_get_for_user(user=user, thread_id=thread_id)  # a 404 unless it is theirs
        return EventStreamStart(after_id=after_id or 0, run_id=None, run_ended=True)
    chosen_run, first_event, terminal_event, thread_last_event = latest
    if after_id is not None:
        run_ended = terminal_event is not None and terminal_event <= after_id
        return EventStreamStart(after_id=after_id, run_id=chosen_run, run_ended=run_ended)
    if first_event is not None:
        return EventStreamStart(
            after_id=first_event - 1, run_id=chosen_run, run_ended=False, await_run_start=True
        )
    # Queued: its events come after everything the thread has now, and after the rest of
    # the run that may still be running before it.
    return EventStreamStart(
        after_id=thread_last_event or 0, run_id=chosen_run, run_ended=False, await_run_start=True
    )


# The thread's latest (or chosen) run of the owner's: its runId, its first event, its
# terminal event (a run has one at most, agent_runs/events/codec.py), and the thread's last
# event. A run's events are found through the (run, seq) index. PostgreSQL and SQLite.
_EVENT_STREAM_START_SQL = f"""
SELECT r.run_id,
       (SELECT e.id FROM {RunEvent._meta.db_table} e WHERE e.run_id = r.id ORDER BY e.seq LIMIT 1),
       (SELECT e.id FROM {RunEvent._meta.db_table} e
         WHERE e.run_id = r.id AND e.type IN ({", ".join(["%s"] * len(TERMINAL_TYPES))})
         ORDER BY e.seq LIMIT 1),
       (SELECT e.id FROM {RunEvent._meta.db_table} e
         WHERE e.thread_id = r.thread_id ORDER BY e.id DESC LIMIT 1)
  FROM {Run._meta.db_table} r JOIN {Thread._meta.db_table} t ON t.id = r.thread_id
 WHERE r.thread_id = %s AND t.owner_id = %s {{run_filter}}
 ORDER BY r.id DESC
 LIMIT 1
"""


def thread_last_event_id(*, thread_id: uuid.UUID) -> int:
    """The id of the thread's latest event (0: it has none)."""
    last = RunEvent.objects.filter(thread_id=thread_id).order_by("-pk").values_list("pk").first()
    return last[0] if last else 0


def run_event_payloads(*, run: Run) -> list[dict[str, Any]]:
    """The run's stored events (their wire JSON), in order (the ``(run, seq)`` index)."""
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("payload", flat=True))


def events_after(
    *, thread_id: uuid.UUID, after_id: int, limit: int
) -> list[tuple[int, int, str, str | None, str, datetime]]:
    """The thread's committed events after ``after_id``, in order, at most ``limit``: each
    its id, its ordinal in its run, its type, its runId, its wire JSON as the database
    gives it back as text (a stream that frames it sends it as it is; one that translates it
    decodes it, as the database driver would have) and when it was written. SQL written
    out, as the stream's start: every stream reads a page when it opens."""
    thread = Thread._meta.pk.get_db_prep_value(thread_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(_EVENTS_AFTER_SQL, [thread, after_id, limit])
        rows = cursor.fetchall()
    return [(*row[:5], db_value(RunEvent, "created_at", row[5])) for row in rows]


# The (thread, id) index. ``->>`` and ``CAST`` read the stored JSON in PostgreSQL and SQLite.
_EVENTS_AFTER_SQL = f"""
SELECT id, seq, type, payload ->> 'runId', CAST(payload AS text), created_at
  FROM {RunEvent._meta.db_table}
 WHERE thread_id = %s AND id > %s
 ORDER BY id
 LIMIT %s
"""


@dataclass(frozen=True)
class RunStart:
    """Where the run an event belongs to starts in its thread's journal."""

    first_event_id: int
    earlier_events: bool  # the thread's journal has events before the run's


def run_start_of_event(*, thread_id: uuid.UUID, event_id: int) -> RunStart | None:
    """Where the run of the thread's last event at or before ``event_id`` starts; ``None``
    when the thread has no such event."""
    events = RunEvent.objects.filter(thread_id=thread_id)
    at_event = events.filter(pk__lte=event_id).order_by("-pk").values("run_id").first()
    if at_event is None:
        return None
    run_events = RunEvent.objects.filter(run_id=at_event["run_id"])
    first: int = run_events.order_by("seq").values_list("pk", flat=True)[0]
    return RunStart(first_event_id=first, earlier_events=events.filter(pk__lt=first).exists())


# The events that give a client's copy of the conversation its message ids: an AG-UI client
# makes a message of each text message, of each reasoning message, of each tool call's
# assistant message (its parent message, or the tool call itself without one) and of each
# tool result.
_ID_FIELDS = {
    "TEXT_MESSAGE_START": ("messageId",),
    "REASONING_MESSAGE_START": ("messageId",),
    "TOOL_CALL_START": ("parentMessageId", "toolCallId"),
    "TOOL_CALL_RESULT": ("messageId",),
}


def thread_message_ids_known(
    *, thread_id: uuid.UUID, ids: Collection[str], streamed: bool = True
) -> set[str]:
    """Which of ``ids`` name a message of the thread: a stored message, or (``streamed``)
    one its events streamed to the client (say, the router's reply, never stored as a
    message), which takes a look through the thread's events."""
    wanted = set(ids)
    known = set(
        Message.objects.filter(thread_id=thread_id, message_id__in=wanted).values_list(
            "message_id", flat=True
        )
    )
    rest = wanted - known
    if not rest or not streamed:
        return known
    named = Q()
    for fields in _ID_FIELDS.values():
        for field in fields:
            named |= Q(**{f"payload__{field}__in": sorted(rest)})
    payloads = RunEvent.objects.filter(thread_id=thread_id, type__in=_ID_FIELDS).filter(named)
    for kind, payload in payloads.values_list("type", "payload"):
        known.update(payload.get(field) for field in _ID_FIELDS[kind] if payload.get(field) in rest)
    return known
