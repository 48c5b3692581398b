"""Reads of threads and runs, and their access checks. A thread that is not the caller's is a
404, never a 403."""

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404

from agent_runs.errors import RunIdAmbiguous
from agent_runs.models import Run, RunEvent, Thread


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


def run_status(*, run_pk: int) -> str | None:
    """The run's status now (``None`` once it is deleted with its thread)."""
    return Run.objects.filter(pk=run_pk).values_list("status", flat=True).first()


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
    """For every thread with queued runs and none running or parked, its first queued run in
    line (the next to start: the oldest that jumps the queue, else the oldest), in one
    query."""
    oldest = (
        Run.objects.filter(status=Run.Status.QUEUED)
        .exclude(thread__runs__status__in=(Run.Status.RUNNING, Run.Status.PAUSED))
        .values("thread_id")
        .annotate(oldest=Coalesce(Min("pk", filter=Q(jumps_queue=True)), Min("pk")))
        .values("oldest")
    )
    return list(Run.objects.filter(pk__in=Subquery(oldest)).order_by("pk"))


# The namespace of the thread ids that protocols' session names stand for.
_SESSION_NAMESPACE = uuid.UUID("6f1d7e0c-9a51-5b8e-8f3c-2b1f0d4a7c10")


def session_thread_id(*, user: AbstractBaseUser, session: str) -> uuid.UUID:
    """The thread a protocol's session or conversation name stands for: a UUID names the
    thread itself (a thread of someone else's is then a 404 where it is read); any other
    name is the caller's own, mapped to a UUID of theirs alone, the same every time."""
    try:
        return uuid.UUID(session)
    except ValueError:
        return uuid.uuid5(_SESSION_NAMESPACE, f"{user.pk}/{session}")
