"""Reads of the caller's threads and their runs, a page at a time (keyset pages: each page is
one query, however deep). A thread that is not the caller's is a 404, never a 403.

A thread's activity is ``Thread.updated_at``: bumped when a message of the thread is stored
(a run's user message when the run is accepted, its answer) and when one of its runs ends
(completed, failed or cancelled; agent_runs/services/lifecycle.py).
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from ag_ui.core import EventType
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Model, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Left
from django.http import Http404

from agent_runs.models import Message, Run, RunEvent, Thread
from agent_runs.selectors.runs import run_get_for_user

T = TypeVar("T")
M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Page(Generic[T]):
    """Up to ``limit`` items, and whether more follow the last of them."""

    items: list[T]
    has_more: bool


@dataclass(frozen=True)
class ThreadPosition:
    """Where a page of threads ends: the last thread's activity and id."""

    updated_at: datetime
    thread_id: uuid.UUID


@dataclass(frozen=True)
class RunPosition:
    """Where a page of runs ends: the last run's creation time and pk."""

    created_at: datetime
    pk: int


def threads_page_for_user(
    *, user: AbstractBaseUser, after: ThreadPosition | None, limit: int
) -> Page[Thread]:
    """The caller's threads, latest activity first (``updated_at``, then id), after
    ``after``; each with its latest run's fields annotated (``latest_run_*``, ``None`` for a
    thread without runs)."""
    threads = _with_latest_run(Thread.objects.filter(owner_id=user.pk))
    if after is not None:
        threads = threads.filter(
            Q(updated_at__lt=after.updated_at)
            | Q(updated_at=after.updated_at, id__lt=after.thread_id)
        )
    return _page(threads.order_by("-updated_at", "-id"), limit)


def thread_detail_get_for_user(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread:
    """The caller's thread with its latest run's fields and ``run_count`` annotated."""
    run_count = (
        Run.objects.filter(thread_id=OuterRef("pk"))
        .order_by()
        .values("thread_id")
        .annotate(count=Count("pk"))
        .values("count")
    )
    thread = (
        _with_latest_run(Thread.objects.filter(pk=thread_id, owner_id=user.pk))
        .annotate(run_count=Coalesce(Subquery(run_count), 0))
        .first()
    )
    if thread is None:
        raise Http404
    return thread


def runs_page_of_thread(*, thread: Thread, after: RunPosition | None, limit: int) -> Page[Run]:
    """The thread's runs, newest first (``created_at``, then pk), after ``after``; each with
    its ``error_code`` annotated."""
    return runs_page(runs=Run.objects.filter(thread=thread), after=after, limit=limit)


def runs_page(*, runs: QuerySet[Run], after: RunPosition | None, limit: int) -> Page[Run]:
    """A page of ``runs``, newest first (``created_at``, then pk), after ``after``; each with
    its ``error_code`` annotated."""
    runs = with_error_code(runs)
    if after is not None:
        runs = runs.filter(
            Q(created_at__lt=after.created_at) | Q(created_at=after.created_at, pk__lt=after.pk)
        )
    return _page(runs.order_by("-created_at", "-pk"), limit)


def with_error_code(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``error_code``: the ``code`` of the run's ``RUN_ERROR`` (``None`` until it has one),
    the public reason it failed or was cancelled (``Run.error`` is for staff only)."""
    error_event = RunEvent.objects.filter(run_id=OuterRef("pk"), type=EventType.RUN_ERROR.value)
    return runs.annotate(error_code=Subquery(error_event.values(code=KT("payload__code"))[:1]))


# A thread's title: the start of its first user message.
TITLE_MAX_CHARS = 80


def _with_latest_run(threads: QuerySet[Thread]) -> QuerySet[Thread]:
    """Each thread's latest run's runId, status and times, and its ``title`` (the first
    ``TITLE_MAX_CHARS`` characters of its first user message), as index probes of one
    query."""
    latest = Run.objects.filter(thread_id=OuterRef("pk")).order_by("-created_at", "-pk")
    first_said = Message.objects.filter(thread_id=OuterRef("pk"), role=Message.Role.USER).order_by(
        "seq"
    )
    return threads.annotate(
        title=Subquery(first_said.values(text=Left("content", TITLE_MAX_CHARS))[:1]),
        **{
            f"latest_run_{field}": Subquery(latest.values(field)[:1])
            for field in ("run_id", "status", "created_at", "finished_at", "automation_job")
        },
    )


def _page(rows: QuerySet[M], limit: int) -> Page[M]:
    found = list(rows[: limit + 1])
    return Page(items=found[:limit], has_more=len(found) > limit)


def run_detail_get_for_user(
    *, user: AbstractBaseUser, run_id: str, thread_id: uuid.UUID | None = None
) -> Run:
    """The caller's run (``run_get_for_user``: a 404, or ``RunIdAmbiguous`` for a runId of
    several threads without ``thread_id``) with its ``error_code`` annotated."""
    run = run_get_for_user(user=user, run_id=run_id, thread_id=thread_id)
    return with_error_code(Run.objects.filter(pk=run.pk)).get()
