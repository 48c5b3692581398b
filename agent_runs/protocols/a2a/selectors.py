"""A2A's reads: a task's runs (the run that began it, and the follow-ups whose parent it is),
the task rebuilt from their stored rows and journals (outbound.py), and the caller's tasks
page by page. docs/protocols/a2a.md, Tasks and contexts."""

from dataclasses import dataclass
from typing import Any

from a2a.utils.errors import TaskNotFoundError
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.utils import timezone

from agent_runs.models import Interrupt, Run, RunEvent
from agent_runs.protocols.a2a.outbound import (
    CANCELED,
    COMPLETED,
    FAILED,
    WORKING,
    TaskProjection,
    Wire,
)

# How this protocol marks the runs it creates in ``Run.request`` (``Run.protocol`` too).
PROTOCOL = "a2a"

# A run's state from its row alone, for when its journal has not said (a run cancelled
# before it started has no events until its turn comes).
_ROW_STATES = {
    Run.Status.RUNNING: WORKING,
    Run.Status.PAUSED: WORKING,
    Run.Status.COMPLETED: COMPLETED,
    Run.Status.FAILED: FAILED,
    Run.Status.CANCELLED: CANCELED,
}


def run_request_kept(
    *, task_id: str, message: dict[str, Any], configuration: dict[str, Any]
) -> dict[str, Any]:
    """What a run created here keeps of its request (``Run.request``)."""
    return {
        "protocol": PROTOCOL,
        "task_id": task_id,
        "message": message,
        "configuration": configuration,
    }


def task_runs(*, user: AbstractBaseUser, task_id: str) -> list[Run]:
    """The caller's task's runs, oldest first; a ``TaskNotFoundError`` for a task that is not
    theirs, or none."""
    runs = list(
        Run.objects.filter(thread__owner_id=user.pk)
        .filter(Q(run_id=task_id) | Q(parent_run_id=task_id))
        .order_by("created_at", "pk")
    )
    roots = [run for run in runs if run.run_id == task_id]
    if len(roots) != 1:  # none, or a runId reused in several threads: not a task of ours
        raise TaskNotFoundError(message=f"Task {task_id} not found")
    root = roots[0]
    return [run for run in runs if run.thread_id == root.thread_id]


def task_runs_of_run(*, run: Run) -> list[Run]:
    """The runs of the task ``run`` is part of (the run that began it, or a follow-up whose
    parent began it), oldest first; whoever owns them (a ``run_status_changed`` receiver
    tells the task's owner)."""
    task_id = run.parent_run_id or run.run_id
    return list(
        Run.objects.filter(thread_id=run.thread_id)
        .filter(Q(run_id=task_id) | Q(parent_run_id=task_id))
        .order_by("created_at", "pk")
    )


def run_events(*, run: Run) -> list[tuple[int, dict[str, Any]]]:
    """The run's stored events with their ids, in order."""
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("pk", "payload"))


@dataclass
class TaskSnapshot:
    """A task as its rows say now, and the id of the last event read of its latest run's
    journal (0: none), from which a stream of that run goes on."""

    projection: TaskProjection
    last_event_id: int


def task_snapshot(*, runs: list[Run], last_run_events: bool = True) -> TaskSnapshot:
    """The task of these runs (``task_runs``): each run's user message, then its journal.
    Without ``last_run_events`` the latest run's journal is left out (a stream that starts
    with it sends it). A task whose latest run waits on approvals asks for input while they
    are open (closed meanwhile: expired, it has failed; answered elsewhere, it is over)."""
    root = runs[0]
    interrupts = _interrupts_of(runs)
    projection = TaskProjection(task_id=root.run_id, context_id=str(root.thread_id))
    last_id = 0
    for index, run in enumerate(runs):
        projection.user_message(_user_message(run, runs[:index], interrupts))
        if index == len(runs) - 1 and not last_run_events:
            break
        last_id = 0
        for event_id, payload in run_events(run=run):
            projection.translate(payload)
            last_id = event_id
    latest = runs[-1]
    if last_run_events and not projection.ended and latest.status in _ROW_STATES:
        projection.settle(_ROW_STATES[Run.Status(latest.status)])
    if last_run_events:
        approvals_settle(projection, interrupts.get(latest.pk, []))
    return TaskSnapshot(projection=projection, last_event_id=last_id)


def approvals_settle(projection: TaskProjection, interrupts: list[Interrupt]) -> list[Wire]:
    """The status update of a task whose approvals were closed without a run of the task
    (``interrupts``: those of its latest run, as stored now); none while one is open."""
    waited = [item for item in interrupts if item.id in projection.approval_ids]
    if not waited:
        return []
    now = timezone.now()
    expired = any(
        item.status == Interrupt.Status.EXPIRED
        or (item.status == Interrupt.Status.PENDING and item.expires_at <= now)
        for item in waited
    )
    if not expired and any(item.status == Interrupt.Status.PENDING for item in waited):
        return []
    return projection.approvals_closed(expired=expired)


def task_wait_over(*, run: Run, projection: TaskProjection) -> list[Wire]:
    """For a stream waiting on the approvals ``run`` stopped on: the status update that ends
    it when they were closed without a run of the task going on (expired), else none (still
    open, or the run that goes on has been created: its events will come)."""
    task_id = run.parent_run_id or run.run_id
    later = Run.objects.filter(thread_id=run.thread_id, pk__gt=run.pk).filter(
        Q(run_id=task_id) | Q(parent_run_id=task_id)
    )
    if later.exists():
        return []
    return approvals_settle(projection, list(Interrupt.objects.filter(run=run)))


def task_next_run(*, run: Run, run_id: str) -> tuple[Run, Wire] | None:
    """The run ``run_id`` when it is the task's run after ``run`` (of the same task, the same
    thread, created after it), with its user message as the history shows it."""
    task_id = run.parent_run_id or run.run_id
    found = Run.objects.filter(
        thread_id=run.thread_id, run_id=run_id, parent_run_id=task_id, pk__gt=run.pk
    ).first()
    if found is None:
        return None
    runs = [item for item in task_runs_of_run(run=found) if item.pk <= found.pk]
    return found, task_run_message(runs=runs)


def open_approvals(*, run: Run) -> list[Interrupt]:
    """The run's approvals still open (pending and not past their time), oldest first."""
    return list(
        Interrupt.objects.filter(
            run=run,
            kind=Interrupt.Kind.APPROVAL,
            status=Interrupt.Status.PENDING,
            expires_at__gt=timezone.now(),
        ).order_by("created_at", "id")
    )


def task_run_message(*, runs: list[Run]) -> Wire:
    """The user message the task's history shows for its latest run (``runs``: the task's
    runs up to it)."""
    return _user_message(runs[-1], runs[:-1], _interrupts_of(runs))


def _interrupts_of(runs: list[Run]) -> dict[int, list[Interrupt]]:
    """The interrupts of the task's runs, by the run they stopped (one query)."""
    found: dict[int, list[Interrupt]] = {}
    for item in Interrupt.objects.filter(run__in=runs).order_by("created_at", "id"):
        found.setdefault(item.run_id, []).append(item)
    return found


def _user_message(run: Run, earlier: list[Run], interrupts: dict[int, list[Interrupt]]) -> Wire:
    """A run's user message in the task's history: the A2A message it was sent with; for a
    run created to go on once its approvals were answered elsewhere (it carries the held
    run's request), those answers as a data part each; another protocol's run, an empty
    one."""
    message = run.request.get("message")
    copied = run.continues_id is not None and any(
        message == other.request.get("message") for other in earlier
    )
    if message and not copied:
        return dict(message)
    answers = [
        item for item in interrupts.get(run.continues_id or 0, []) if item.answered_by_id == run.pk
    ]
    if not answers:
        return _plain_message(run)
    return {
        "messageId": f"answer-{run.run_id}",
        "role": "ROLE_USER",
        "parts": [
            {
                "data": {"interruptId": item.id, **_payload_of(item)},
                "mediaType": "application/json",
            }
            for item in answers
        ],
    }


def _payload_of(interrupt: Interrupt) -> dict[str, Any]:
    payload = (interrupt.answer or {}).get("payload")
    return payload if isinstance(payload, dict) else {}


def _plain_message(run: Run) -> dict[str, Any]:
    """A run of the task that another protocol created has no A2A message kept."""
    return {"messageId": f"run-{run.run_id}", "role": "ROLE_USER", "parts": []}


@dataclass
class TaskPage:
    tasks: list[TaskProjection]
    next_page_token: str
    total_size: int


def tasks_of_user(
    *, user: AbstractBaseUser, context_id: str | None, page_size: int, page_token: str
) -> TaskPage:
    """The caller's tasks (the runs this protocol began), newest first, ``page_size`` at a
    time after the cursor ``page_token`` (the last task's row number, as text)."""
    roots = Run.objects.filter(
        thread__owner_id=user.pk, protocol=Run.Protocol.A2A, parent_run_id=""
    )
    if context_id is not None:
        roots = roots.filter(thread_id=context_id)
    total = roots.count()
    if page_token:
        roots = roots.filter(pk__lt=int(page_token))
    page = list(roots.order_by("-pk")[: page_size + 1])
    more = len(page) > page_size
    page = page[:page_size]
    tasks = [
        task_snapshot(runs=task_runs(user=user, task_id=run.run_id)).projection for run in page
    ]
    return TaskPage(tasks=tasks, next_page_token=str(page[-1].pk) if more else "", total_size=total)
