"""The Agent Protocol's reads beyond the core's: what a task's status needs to know of the
approvals its latest run waits on, and a task's steps with its approvals among them.

An approval (an ``Interrupt`` of kind approval) is the task's ``approval`` step: no row of
its own, but the interrupt itself, rendered by outbound.py (``approval_step``), so its
status is always the interrupt's, whichever protocol (or person) answered it. It sits among
the task's steps by the time it was made: after the stage that stopped on it, before the
stages of the run that goes on. A caller's thread only; anything else is a 404.
"""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import Http404

from agent_runs.models import Interrupt, Run, Step, Thread
from agent_runs.protocols.agent_protocol.outbound import approval_step_id
from agent_runs.protocols.agent_protocol.outbound_ws import HeldRun
from agent_runs.selectors.steps import NumberedPage, steps_of_thread, tasks_of_user

TaskStep = Step | Interrupt


def with_approval_state(threads: QuerySet[Thread]) -> QuerySet[Thread]:
    """Threads annotated for their task's status (outbound.py, ``task_status``): whether
    one waits on an interrupt (``waits_on_interrupt``; a pending one is always its latest
    run's, since the thread takes no new turn meanwhile), whether its latest run goes on
    with a held reply (``latest_run_continues``), and whether the latest run's held reply was
    left when its approvals expired (``latest_run_abandoned``)."""
    latest = Run.objects.filter(thread_id=OuterRef("pk")).order_by("-created_at", "-pk")
    return threads.annotate(
        waits_on_interrupt=Exists(
            Interrupt.objects.filter(thread_id=OuterRef("pk"), status=Interrupt.Status.PENDING)
        ),
        latest_run_pk=Subquery(latest.values("pk")[:1]),
        latest_run_continues_id=Subquery(latest.values("continues_id")[:1]),
    ).annotate(
        latest_run_abandoned=Exists(
            Interrupt.objects.filter(
                run_id=OuterRef("latest_run_pk"), status=Interrupt.Status.EXPIRED
            )
        )
    )


def tasks_of(*, user: AbstractBaseUser) -> QuerySet[Thread]:
    """The caller's tasks, newest first, annotated for their status."""
    return with_approval_state(tasks_of_user(user=user))


def task_get(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread:
    """The caller's task, annotated for its status (a 404 otherwise)."""
    thread = tasks_of(user=user).filter(pk=thread_id).first()
    if thread is None:
        raise Http404
    return thread


def task_cycles(*, thread: Thread) -> QuerySet[Run]:
    """The task's runs, oldest first, each annotated for its status as a cycle: whether it
    waits on interrupts, and whether it held a reply left when its approvals expired (a run
    that goes on from it is another cycle)."""
    pending = Interrupt.objects.filter(run_id=OuterRef("pk"), status=Interrupt.Status.PENDING)
    expired = Interrupt.objects.filter(run_id=OuterRef("pk"), status=Interrupt.Status.EXPIRED)
    went_on = Run.objects.filter(continues_id=OuterRef("pk"))
    return (
        Run.objects.filter(thread=thread)
        .annotate(
            waits_on_interrupt=Exists(pending),
            abandoned=Exists(expired) & ~Exists(went_on),
        )
        .order_by("created_at", "pk")
    )


def run_waits_on_interrupt(*, run: Run | None) -> tuple[bool, bool]:
    """Whether the run waits on an interrupt, and whether its held reply was left when its
    approvals expired (it is then the thread's latest run)."""
    if run is None:
        return False, False
    statuses = set(Interrupt.objects.filter(run=run).values_list("status", flat=True))
    waits = Interrupt.Status.PENDING in statuses
    abandoned = not waits and Interrupt.Status.EXPIRED in statuses
    return waits, abandoned and not Run.objects.filter(continues=run).exists()


def _approvals(thread: Thread) -> QuerySet[Interrupt]:
    return Interrupt.objects.filter(thread=thread, kind=Interrupt.Kind.APPROVAL).order_by(
        "created_at", "id"
    )


def approvals_of_run(*, run: Run) -> list[Interrupt]:
    """The run's approvals, in the order they were made, each with its runs."""
    return list(
        Interrupt.objects.filter(run=run, kind=Interrupt.Kind.APPROVAL)
        .select_related("run", "answered_by")
        .order_by("created_at", "id")
    )


def pending_approval_of_run(*, run: Run | None) -> Interrupt | None:
    """The first approval the run still waits on (``None``: none)."""
    if run is None:
        return None
    return next(
        (item for item in approvals_of_run(run=run) if item.status == Interrupt.Status.PENDING),
        None,
    )


def task_steps_page(*, thread: Thread, number: int, size: int) -> NumberedPage[Any]:
    """Page ``number`` of the task's steps, its approvals among them by the time they were
    made. The two are merged on their keys (time, then id) up to the page's end, then only
    the page's rows are read."""
    steps = steps_of_thread(thread=thread).prefetch_related(None)
    approvals = _approvals(thread)
    end = number * size
    keys = sorted(
        [(at, 0, str(pk)) for at, pk in steps.values_list("created_at", "pk")[:end]]
        + [(at, 1, pk) for at, pk in approvals.values_list("created_at", "pk")[:end]]
    )[end - size : end]
    step_rows = steps_of_thread(thread=thread).in_bulk(
        [uuid.UUID(key) for _at, kind, key in keys if kind == 0]
    )
    approval_rows = approvals.select_related("run", "answered_by").in_bulk(
        [key for _at, kind, key in keys if kind == 1]
    )
    items: list[TaskStep] = [
        step_rows[uuid.UUID(key)] if kind == 0 else approval_rows[key] for _at, kind, key in keys
    ]
    return NumberedPage(
        items=_held_stages_not_last(items),
        total=steps.count() + approvals.count(),
        number=number,
        size=size,
    )


def task_step_get(*, thread: Thread, step_id: uuid.UUID) -> TaskStep:
    """One of the task's steps, or one of its approvals (whose id is derived: the task's
    approvals are looked through)."""
    step = steps_of_thread(thread=thread).filter(pk=step_id).first()
    if step is not None:
        return _held_stages_not_last([step])[0]
    for interrupt in _approvals(thread).select_related("run", "answered_by"):
        found = approval_step_id(
            thread_id=thread.pk, run_id=interrupt.run.run_id, interrupt_id=interrupt.id
        )
        if found == step_id:
            return interrupt
    raise Http404


def _held_stages_not_last(items: list[TaskStep]) -> list[TaskStep]:
    """A stage that stopped on approvals ended its run (``is_last`` in the row), but not the
    task's work: its approval steps come after it. Read so (the rows are not changed)."""
    stages = [item for item in items if isinstance(item, Step) and item.is_last and item.run_id]
    if not stages:
        return items
    held = set(
        Interrupt.objects.filter(
            run_id__in={stage.run_id for stage in stages}, kind=Interrupt.Kind.APPROVAL
        ).values_list("run_id", flat=True)
    )
    for stage in stages:
        if stage.run_id in held and stage.name == "worker":
            stage.is_last = False
    return items


def held_runs_of(*, thread_id: uuid.UUID, run_ids: set[str]) -> dict[str, HeldRun]:
    """For those of these runs of the thread that go on with a held reply, the run that
    held it and its approvals (for the WebSocket's frames of their ``RUN_STARTED``)."""
    held = dict(
        Run.objects.filter(
            thread_id=thread_id, run_id__in=run_ids, continues__isnull=False
        ).values_list("run_id", "continues_id")
    )
    if not held:
        return {}
    approvals: dict[int, list[dict[str, Any]]] = {pk: [] for pk in held.values()}
    held_ids: dict[int, str] = {}
    rows = Interrupt.objects.filter(run_id__in=held.values()).select_related("run")
    for interrupt in rows.order_by("created_at", "id"):
        held_ids[interrupt.run_id] = interrupt.run.run_id
        if interrupt.kind != Interrupt.Kind.APPROVAL:
            continue
        payload = (interrupt.answer or {}).get("payload")
        approved = payload.get("approved") if isinstance(payload, dict) else None
        approvals[interrupt.run_id].append(
            {
                "id": interrupt.id,
                "status": interrupt.status,
                "approved": approved if interrupt.status == Interrupt.Status.RESOLVED else False,
            }
        )
    return {
        run_id: HeldRun(run_id=held_ids[pk], approvals=tuple(approvals[pk]))
        for run_id, pk in held.items()
        if pk in held_ids
    }
