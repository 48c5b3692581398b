"""The Agent Protocol's objects as each URL set sends them: tasks, steps, artifacts and
pages. Pure: stored rows (with the selectors' annotations) in, JSON-ready dicts out.

The spec set (``/api/``, docs/spec/agent-protocol-tasks.md) keeps a step's input and output
as JSON values; the official v1 set (``/ap/v1/agent/``) sends them as strings, has no
``failed`` step status (a failed step is ``completed`` with ``additional_output.status``
``"failed"`` and ``is_last``), and says ``agent_created`` of each artifact. Fields a set
does not define (``status``, ``created_at`` in v1) are extensions its clients ignore.

An approval a run waits on (an ``Interrupt`` of kind approval) is the task's ``approval``
step: it has no row of its own, its status is the interrupt's (``approval_step``).
"""

import json
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from agent_runs.models import Artifact, Interrupt, Run, Step, Thread, agent_step_id
from agent_runs.selectors.interrupts import interrupt_as_agui
from agent_runs.selectors.steps import NumberedPage

# A task's status, from its latest run (docs/spec/agent-protocol-tasks.md, 任务状态).
_TASK_STATUS = {
    None: "created",
    Run.Status.QUEUED: "created",
    Run.Status.RUNNING: "running",
    Run.Status.PAUSED: "paused",
    Run.Status.COMPLETED: "completed",
    Run.Status.FAILED: "failed",
    Run.Status.CANCELLED: "cancelled",
}


def run_task_status(run: Run | None, *, waits: bool = False, abandoned: bool = False) -> str:
    """The status of a task whose latest run is ``run`` (``None``: it has none); ``waits``
    and ``abandoned`` as in ``task_status``."""
    if run is None:
        return task_status(None, None)
    return task_status(
        run.status,
        run.pause_requested,
        resumed=run.resumed_at is not None or run.continues_id is not None,
        waits=waits,
        abandoned=abandoned,
    )


def _thread_task_status(thread: Thread) -> str:
    """From the latest run's fields the selectors annotate (the core's, and this
    protocol's: selectors.py, ``with_approval_state``)."""
    return task_status(
        thread.latest_run_status,  # type: ignore[attr-defined]
        thread.latest_run_pause_requested,  # type: ignore[attr-defined]
        resumed=thread.latest_run_resumed_at is not None  # type: ignore[attr-defined]
        or getattr(thread, "latest_run_continues_id", None) is not None,
        waits=getattr(thread, "waits_on_interrupt", False),
        abandoned=getattr(thread, "latest_run_abandoned", False),
    )


def task_status(
    run_status: str | None,
    pause_requested: bool | None,
    *,
    resumed: bool = False,
    waits: bool = False,
    abandoned: bool = False,
) -> str:
    """A running run whose pause was asked for reports ``paused`` at once (its job parks it
    at the next stage boundary); a resumed run reports ``running`` at once, though it waits
    in the queue for a worker, and so does a run that goes on with a reply held on approvals.

    A run whose reply is held on approvals has ended (``completed``), yet its task
    ``waits`` on their answers: ``paused``. Approvals that expired unanswered leave the held
    reply ``abandoned``: the work was not done, ``failed``."""
    if waits:
        return "paused"
    if abandoned and run_status == Run.Status.COMPLETED:
        return "failed"
    if run_status == Run.Status.RUNNING and pause_requested:
        return "paused"
    if run_status == Run.Status.QUEUED and resumed:
        return "running"
    return _TASK_STATUS[None if run_status is None else Run.Status(run_status)]


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The spec set.


def spec_task(thread: Thread) -> dict[str, Any]:
    return {
        "task_id": str(thread.pk),
        "input": thread.first_input,  # type: ignore[attr-defined]  # selectors annotate
        "status": _thread_task_status(thread),
        "created_at": _time(thread.created_at),
        "modified_at": _time(thread.updated_at),
        "artifacts": [_artifact_ref(artifact) for artifact in thread.artifacts.all()],
    }


def spec_task_detail(thread: Thread, runs: Iterable[Run]) -> dict[str, Any]:
    """A task with its cycles (its runs, oldest first) and workspace."""
    return {
        **spec_task(thread),
        "workspace": thread.metadata.get("workspace"),
        "cycles": [
            {
                "cycle_id": run.run_id,
                "status": run_task_status(
                    run,
                    waits=getattr(run, "waits_on_interrupt", False),
                    abandoned=getattr(run, "abandoned", False),
                ),
                "created_at": _time(run.created_at),
                "started_at": _time(run.started_at),
                "finished_at": _time(run.finished_at),
            }
            for run in runs
        ],
    }


def spec_task_created(thread: Thread, text: str) -> dict[str, Any]:
    """``POST /api/tasks``'s answer: the agent now working on the task."""
    return {
        "agent": {
            "id": str(thread.pk),
            "name": f"Task: {text[:80]}",
            "status": "ACTIVE",
            "task": text,
            "createdAt": _time(thread.created_at),
        }
    }


def spec_step(step: Step, download_url: Callable[[Artifact], str]) -> dict[str, Any]:
    return {
        "step_id": str(step.pk),
        "task_id": str(step.thread_id),
        "name": step.name,
        "status": step.status,
        "source": step.source,
        "input": step.input,
        "output": step.output,
        "additional_input": step.additional_input,
        "additional_output": step.additional_output,
        "artifacts": [
            {**_artifact_ref(artifact), "uri": download_url(artifact)}
            for artifact in step.artifacts.all()
        ],
        "is_last": step.is_last,
        "created_at": _time(step.created_at),
        "started_at": _time(step.started_at),
        "completed_at": _time(step.completed_at),
    }


# An approval as a step.

APPROVAL_STEP = "approval"

_APPROVAL_STEP_STATUS = {
    Interrupt.Status.PENDING: Step.Status.CREATED,
    Interrupt.Status.RESOLVED: Step.Status.COMPLETED,
    Interrupt.Status.CANCELLED: Step.Status.COMPLETED,
    Interrupt.Status.EXPIRED: Step.Status.FAILED,
}


def approval_step_id(*, thread_id: uuid.UUID | str, run_id: str, interrupt_id: str) -> uuid.UUID:
    """The id of the approval step of an interrupt: derived, as a stage's is, from what the
    run's ``CUSTOM run_interrupted`` event carries, so the WebSocket's frames name the step
    the REST API gives."""
    return agent_step_id(
        thread_id=thread_id, run_id=run_id, stage=f"{APPROVAL_STEP}/{interrupt_id}"
    )


def approval_question(interrupt: Interrupt) -> str:
    """What the approval step asks (its ``output``): the call, and how to answer."""
    arguments = json.dumps(interrupt.arguments, ensure_ascii=False)
    answer = json.dumps({"interruptId": interrupt.id, "approved": True})
    return (
        f"{interrupt.message or f'Allow {interrupt.tool_name} to run?'} "
        f"{interrupt.tool_name} {arguments}. "
        f'Answer with additional_input {answer} (or "approved": false).'
    )


def approval_step(interrupt: Interrupt) -> dict[str, Any]:
    """An approval as the spec set's ``Step`` (``interrupt.run`` and ``answered_by``
    loaded): ``created`` while it waits for its answer, ``completed`` once answered (or
    cancelled: declined), ``failed`` when it expired. ``output`` asks for the answer;
    ``additional_output`` holds the interrupt as AG-UI 1.0 gives it; ``additional_input``
    is the answer it was given."""
    status = _APPROVAL_STEP_STATUS[Interrupt.Status(interrupt.status)]
    answer = (interrupt.answer or {}).get("payload")
    closed = interrupt.status != Interrupt.Status.PENDING
    answered_by = interrupt.answered_by.run_id if interrupt.answered_by else None
    step_id = approval_step_id(
        thread_id=interrupt.thread_id, run_id=interrupt.run.run_id, interrupt_id=interrupt.id
    )
    return {
        "step_id": str(step_id),
        "task_id": str(interrupt.thread_id),
        "name": APPROVAL_STEP,
        "status": status.value,
        "source": Step.Source.AGENT.value,
        "input": None,
        "output": approval_question(interrupt),
        "additional_input": (
            {"interruptId": interrupt.id, **(answer if isinstance(answer, dict) else {})}
            if closed and interrupt.status != Interrupt.Status.EXPIRED
            else {}
        ),
        "additional_output": {
            "interrupt": interrupt_as_agui(interrupt),
            "interrupt_status": interrupt.status,
            "cycle_id": interrupt.run.run_id,
            "answered_by": answered_by,
        },
        "artifacts": [],
        "is_last": status == Step.Status.FAILED,
        "created_at": _time(interrupt.created_at),
        "started_at": _time(interrupt.closed_at),
        "completed_at": _time(interrupt.closed_at),
    }


def spec_task_step(
    item: Step | Interrupt, download_url: Callable[[Artifact], str]
) -> dict[str, Any]:
    """A task's step as the spec set sends it: a stage or a client's step, or an approval."""
    if isinstance(item, Interrupt):
        return approval_step(item)
    return spec_step(item, download_url)


def spec_artifact(artifact: Artifact, uri: str) -> dict[str, Any]:
    return {
        **_artifact_ref(artifact),
        "uri": uri,
        "mime_type": artifact.mime_type,
        "size_bytes": artifact.size_bytes,
        "agent_created": artifact.agent_created,
        "created_at": _time(artifact.created_at),
    }


def spec_pagination(page: NumberedPage[Any]) -> dict[str, int]:
    return {
        "total": page.total,
        "page": page.number,
        "pageSize": page.size,
        "totalPages": page.pages,
    }


def _artifact_ref(artifact: Artifact) -> dict[str, Any]:
    return {
        "artifact_id": str(artifact.pk),
        "file_name": artifact.file_name,
        "relative_path": artifact.relative_path,
    }


# The official v1 set.


def v1_task(thread: Thread) -> dict[str, Any]:
    return {
        "task_id": str(thread.pk),
        "input": thread.first_input,  # type: ignore[attr-defined]  # selectors annotate
        "additional_input": thread.metadata.get("additional_input") or {},
        "artifacts": [v1_artifact(artifact) for artifact in thread.artifacts.all()],
        "status": _thread_task_status(thread),
        "created_at": _time(thread.created_at),
    }


def v1_step(item: Step | Interrupt) -> dict[str, Any]:
    """A task's step (a stage, a client's step, or an approval) as the official set sends
    it."""
    if isinstance(item, Interrupt):
        step = approval_step(item)
        return _v1_step(step, artifacts=[])
    fields = {
        "task_id": str(item.thread_id),
        "step_id": str(item.pk),
        "name": item.name,
        "status": item.status,
        "input": item.input,
        "additional_input": item.additional_input,
        "output": item.output,
        "additional_output": item.additional_output,
        "is_last": item.is_last,
    }
    return _v1_step(fields, artifacts=[v1_artifact(artifact) for artifact in item.artifacts.all()])


def _v1_step(step: dict[str, Any], *, artifacts: list[dict[str, Any]]) -> dict[str, Any]:
    failed = step["status"] == Step.Status.FAILED
    additional_output = dict(step["additional_output"])
    if failed:
        additional_output["status"] = "failed"
    return {
        "task_id": step["task_id"],
        "step_id": step["step_id"],
        "name": step["name"] or None,
        "status": Step.Status.COMPLETED.value if failed else step["status"],
        "input": _as_text(step["input"]),
        "additional_input": step["additional_input"],
        "output": _as_text(step["output"]),
        "additional_output": additional_output,
        "artifacts": artifacts,
        "is_last": step["is_last"] or failed,
    }


def v1_artifact(artifact: Artifact) -> dict[str, Any]:
    return {
        "artifact_id": str(artifact.pk),
        "agent_created": artifact.agent_created,
        "file_name": artifact.file_name,
        "relative_path": artifact.relative_path or None,
    }


def v1_pagination(page: NumberedPage[Any]) -> dict[str, int]:
    return {
        "total_items": page.total,
        "total_pages": page.pages,
        "current_page": page.number,
        "page_size": page.size,
    }


def _as_text(value: Any) -> str | None:
    """A step's input or output as the official set's string."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
