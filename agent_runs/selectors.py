"""Reads and access checks. A thread that is not the caller's is a 404, never a 403."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import F, Min, OuterRef, Subquery
from django.http import Http404

from agent_runs.codec import TERMINAL_TYPES
from agent_runs.errors import RunIdAmbiguous
from agent_runs.models import (
    Message,
    Run,
    RunEvent,
    Thread,
    UserMemory,
    UserProfile,
    Visibility,
)


def thread_get_for_user(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread:
    thread = Thread.objects.filter(pk=thread_id, owner_id=user.pk).first()
    if thread is None:
        raise Http404
    return thread


def run_get_for_user(
    *, user: AbstractBaseUser, run_id: str, thread_id: uuid.UUID | None = None
) -> Run:
    """The caller's run with this runId (unique per thread; ``thread_id`` picks one when the
    caller reused a runId in several threads). Anything else is a 404."""
    runs = Run.objects.filter(run_id=run_id, thread__owner_id=user.pk)
    if thread_id is not None:
        runs = runs.filter(thread_id=thread_id)
    found = list(runs[:2])
    if not found:
        raise Http404
    if len(found) > 1:
        raise RunIdAmbiguous()
    return found[0]


def run_for_execution(*, run_pk: int) -> tuple[Run, int]:
    """A run with its thread, and its thread's last event id (0 for none: the emitter's
    starting point), in one query."""
    last_event = RunEvent.objects.filter(thread_id=OuterRef("thread_id")).order_by("-pk")
    run = (
        Run.objects.select_related("thread")
        .annotate(thread_last_event_id=Subquery(last_event.values("pk")[:1]))
        .get(pk=run_pk)
    )
    return run, run.thread_last_event_id or 0


def runs_next_queued_of_idle_threads() -> list[Run]:
    """For every thread with queued runs and none running, its oldest queued run (the next
    to start), in one query."""
    oldest = (
        Run.objects.filter(status=Run.Status.QUEUED)
        .exclude(thread__runs__status=Run.Status.RUNNING)
        .values("thread_id")
        .annotate(oldest=Min("pk"))
        .values("oldest")
    )
    return list(Run.objects.filter(pk__in=Subquery(oldest)).order_by("pk"))


def run_next_queued(*, thread_id: uuid.UUID) -> Run | None:
    """The thread's oldest queued run: the next one to start once none is running."""
    return Run.objects.filter(thread_id=thread_id, status=Run.Status.QUEUED).order_by("pk").first()


@dataclass(frozen=True)
class EventStreamStart:
    """Where a client's event stream starts and which run's terminal event ends it."""

    after_id: int
    run_id: str | None  # the thread's latest run, whose terminal event ends the stream
    run_ended: bool  # that terminal event is already behind the cursor


def event_stream_start(
    *, user: AbstractBaseUser, thread_id: uuid.UUID, after_id: int | None
) -> EventStreamStart:
    """Where the caller's stream of a thread starts (spec/sse-events-and-usage.md, section 2):
    after ``Last-Event-ID``, or without a cursor at the latest run's first event. A thread
    that is not the caller's is a 404. One query when the thread has runs; every stream that
    opens asks this, so it is SQL written out (the ORM took longer to build it than the
    database to answer it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _EVENT_STREAM_START_SQL,
            [
                *sorted(TERMINAL_TYPES),
                Thread._meta.pk.get_db_prep_value(thread_id, connection),
                user.pk,
            ],
        )
        latest = cursor.fetchone()
    if latest is None:
        thread_get_for_user(user=user, thread_id=thread_id)  # a 404 unless it is theirs
        return EventStreamStart(after_id=after_id or 0, run_id=None, run_ended=True)
    run_id, first_event, terminal_event, thread_last_event = latest
    if after_id is None:
        after_id = first_event - 1 if first_event is not None else (thread_last_event or 0)
    run_ended = terminal_event is not None and terminal_event <= after_id
    return EventStreamStart(after_id=after_id, run_id=run_id, run_ended=run_ended)


# The thread's latest run of the owner's: its id, its first event, its terminal event (a run
# has one at most, agent_runs/codec.py), and the thread's last event. PostgreSQL and SQLite.
_EVENT_STREAM_START_SQL = f"""
SELECT r.run_id,
       (SELECT e.id FROM {RunEvent._meta.db_table} e WHERE e.run_id = r.id ORDER BY e.id LIMIT 1),
       (SELECT e.id FROM {RunEvent._meta.db_table} e
         WHERE e.run_id = r.id AND e.type IN ({", ".join(["%s"] * len(TERMINAL_TYPES))})
         ORDER BY e.id LIMIT 1),
       (SELECT e.id FROM {RunEvent._meta.db_table} e
         WHERE e.thread_id = r.thread_id ORDER BY e.id DESC LIMIT 1)
  FROM {Run._meta.db_table} r JOIN {Thread._meta.db_table} t ON t.id = r.thread_id
 WHERE r.thread_id = %s AND t.owner_id = %s
 ORDER BY r.id DESC
 LIMIT 1
"""


def events_after(*, thread_id: uuid.UUID, after_id: int, limit: int) -> list[tuple[int, Any]]:
    """The thread's committed events after ``after_id``, in order, at most ``limit``."""
    return list(
        RunEvent.objects.filter(thread_id=thread_id, pk__gt=after_id)
        .order_by("pk")
        .values_list("pk", "payload")[:limit]
    )


def context_messages_for(
    *,
    thread_id: uuid.UUID,
    before_seq: int,
    consumers: Sequence[Visibility],
    token_budget: int,
) -> dict[Visibility, list[tuple[str, str]]]:
    """The thread's earlier messages that each consumer (a stage of the run) may see
    (spec/sse-events-and-usage.md, section 8: its bit of ``visibility_mask``), as (role,
    content) oldest first: the newest that fit in ``token_budget`` (about four characters a
    token). One query for all the consumers. A tool result becomes an assistant note naming
    the tool, since a model's context takes tool results only right after its own calls."""
    any_of = 0
    for consumer in consumers:
        any_of |= int(consumer)
    rows = (
        Message.objects.filter(
            thread_id=thread_id,
            seq__lt=before_seq,
            role__in=[Message.Role.USER, Message.Role.ASSISTANT, Message.Role.TOOL],
        )
        .alias(visible=F("visibility_mask").bitand(any_of))
        .filter(visible__gt=0)
        .order_by("-seq")
        .values_list("role", "content", "metadata", "visibility_mask")[
            : _CONTEXT_MESSAGES_MAX * len(consumers)
        ]
    )
    contexts: dict[Visibility, list[tuple[str, str]]] = {}
    for consumer in consumers:
        chosen: list[tuple[str, str]] = []
        spent = 0
        for role, content, metadata, mask in rows:
            if not mask & int(consumer):
                continue
            if role == Message.Role.TOOL:
                tool = metadata.get("tool_name", "tool")
                role, content = "assistant", f"[{tool} result] {content}"
            spent += len(content) // 4 + 4
            if spent > token_budget or len(chosen) == _CONTEXT_MESSAGES_MAX:
                break
            chosen.append((role, content))
        contexts[consumer] = chosen[::-1]
    return contexts


_CONTEXT_MESSAGES_MAX = 200


def user_memory_notes(*, user_id: int, limit: int) -> str:
    """What the memory stage kept about the user, newest first, as prompt lines
    (``[id] kind: content``); empty when nothing is kept."""
    rows = (
        UserMemory.objects.filter(owner_id=user_id)
        .order_by("-created_at", "-pk")
        .values_list("pk", "kind", "content")[:limit]
    )
    return "\n".join(f"[{pk}] {kind}: {content}" for pk, kind, content in rows)


def user_memory_count(*, user_id: int) -> int:
    return UserMemory.objects.filter(owner_id=user_id).count()


def user_locale(*, user_id: int) -> str:
    """The user's locale for compiled UI (``UserProfile.settings["locale"]``, else "en")."""
    profile = UserProfile.objects.filter(user_id=user_id).values_list("settings", flat=True).first()
    locale = (profile or {}).get("locale")
    return locale if isinstance(locale, str) and locale else "en"
