"""Reads of a thread's work as steps and artifacts, and of threads with what they were asked
first (the Agent Protocol's tasks), a numbered page at a time. A thread, step or artifact that
is not the caller's is a 404, never a 403."""

import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.http import Http404

from agent_runs.models import Artifact, Message, Run, Step, Thread

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class NumberedPage(Generic[M]):
    """Page ``number`` (from 1) of ``size`` items, and how many there are in all."""

    items: list[M]
    total: int
    number: int
    size: int

    @property
    def pages(self) -> int:
        return -(-self.total // self.size)


def numbered_page(rows: QuerySet[M], *, number: int, size: int) -> NumberedPage[M]:
    start = (number - 1) * size
    return NumberedPage(
        items=list(rows[start : start + size]), total=rows.count(), number=number, size=size
    )


def tasks_of_user(*, user: AbstractBaseUser) -> QuerySet[Thread]:
    """The caller's threads, newest first, each with its latest run's ``latest_run_status``
    ``latest_run_pause_requested`` and ``latest_run_resumed_at`` (``None`` without runs) and
    the first thing it was
    asked (``first_input``: its first user message's text)."""
    return _as_tasks(Thread.objects.filter(owner_id=user.pk)).order_by("-created_at", "-pk")


def task_get_for_user(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread:
    """The caller's thread, annotated as in ``tasks_of_user``."""
    thread = _as_tasks(Thread.objects.filter(pk=thread_id, owner_id=user.pk)).first()
    if thread is None:
        raise Http404
    return thread


def _as_tasks(threads: QuerySet[Thread]) -> QuerySet[Thread]:
    latest = Run.objects.filter(thread_id=OuterRef("pk")).order_by("-created_at", "-pk")
    first_user = Message.objects.filter(thread_id=OuterRef("pk"), role=Message.Role.USER).order_by(
        "seq"
    )
    return threads.annotate(
        latest_run_status=Subquery(latest.values("status")[:1]),
        latest_run_pause_requested=Subquery(latest.values("pause_requested")[:1]),
        latest_run_resumed_at=Subquery(latest.values("resumed_at")[:1]),
        first_input=Subquery(first_user.values("content")[:1]),
    )


def latest_run_of_thread(*, thread: Thread) -> Run | None:
    return Run.objects.filter(thread=thread).order_by("-created_at", "-pk").first()


def steps_of_thread(*, thread: Thread) -> QuerySet[Step]:
    """The thread's steps in the order they were created, with their artifacts."""
    return Step.objects.filter(thread=thread).prefetch_related("artifacts")


def step_get_of_thread(*, thread: Thread, step_id: uuid.UUID) -> Step:
    step = steps_of_thread(thread=thread).filter(pk=step_id).first()
    if step is None:
        raise Http404
    return step


FINISHED_STEP_STATUSES = (Step.Status.COMPLETED, Step.Status.FAILED)


def finished_step_ids_of_run(*, run: Run) -> set[uuid.UUID]:
    return set(
        Step.objects.filter(run=run, status__in=FINISHED_STEP_STATUSES).values_list("pk", flat=True)
    )


def step_answering(*, run: Run, finished_before: set[uuid.UUID]) -> Step | None:
    """The run's first step to have finished that had not in ``finished_before``; failing
    that its latest step, as it stands (``None``: the run has none)."""
    steps = list(Step.objects.filter(run=run).prefetch_related("artifacts"))
    for step in steps:
        if step.status in FINISHED_STEP_STATUSES and step.pk not in finished_before:
            return step
    return steps[-1] if steps else None


def artifacts_of_thread(*, thread: Thread, step: Step | None = None) -> QuerySet[Artifact]:
    """The thread's artifacts (of one of its steps, when ``step`` is given), oldest first."""
    artifacts = Artifact.objects.filter(thread=thread)
    return artifacts if step is None else artifacts.filter(step=step)


def artifact_get_of_thread(
    *, thread: Thread, artifact_id: uuid.UUID, step: Step | None = None
) -> Artifact:
    artifact = artifacts_of_thread(thread=thread, step=step).filter(pk=artifact_id).first()
    if artifact is None:
        raise Http404
    return artifact


def agent_files_of_steps(*, step_ids: set[str]) -> dict[str, list[Mapping[str, Any]]]:
    """The files the agent made in these steps, oldest first, by step id."""
    files: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    rows = (
        Artifact.objects.filter(step_id__in=step_ids, agent_created=True)
        .order_by("created_at", "pk")
        .values("id", "step_id", "file_name", "relative_path", "mime_type", "size_bytes")
    )
    for row in rows:
        files[str(row["step_id"])].append(row)
    return files
