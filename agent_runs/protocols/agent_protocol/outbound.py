"""The Agent Protocol's objects as each URL set sends them: tasks, steps, artifacts and
pages. Pure: stored rows (with the selectors' annotations) in, JSON-ready dicts out.

The spec set (``/api/``, docs/spec/agent-protocol-tasks.md) keeps a step's input and output
as JSON values; the official v1 set (``/ap/v1/agent/``) sends them as strings, has no
``failed`` step status (a failed step is ``completed`` with ``additional_output.status``
``"failed"`` and ``is_last``), and says ``agent_created`` of each artifact. Fields a set
does not define (``status``, ``created_at`` in v1) are extensions its clients ignore.
"""

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from agent_runs.models import Artifact, Run, Step, Thread
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


def run_task_status(run: Run | None) -> str:
    """The status of a task whose latest run is ``run`` (``None``: it has none)."""
    if run is None:
        return task_status(None, None)
    return task_status(run.status, run.pause_requested, resumed=run.resumed_at is not None)


def _thread_task_status(thread: Thread) -> str:
    """From the latest run's fields the selectors annotate."""
    return task_status(
        thread.latest_run_status,  # type: ignore[attr-defined]
        thread.latest_run_pause_requested,  # type: ignore[attr-defined]
        resumed=thread.latest_run_resumed_at is not None,  # type: ignore[attr-defined]
    )


def task_status(
    run_status: str | None, pause_requested: bool | None, *, resumed: bool = False
) -> str:
    """A running run whose pause was asked for reports ``paused`` at once (its job parks it
    at the next stage boundary); a resumed run reports ``running`` at once, though it waits
    in the queue for a worker."""
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
                "status": task_status(
                    run.status, run.pause_requested, resumed=run.resumed_at is not None
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


def v1_step(step: Step) -> dict[str, Any]:
    failed = step.status == Step.Status.FAILED
    additional_output = dict(step.additional_output)
    if failed:
        additional_output["status"] = "failed"
    return {
        "task_id": str(step.thread_id),
        "step_id": str(step.pk),
        "name": step.name or None,
        "status": Step.Status.COMPLETED.value if failed else step.status,
        "input": _as_text(step.input),
        "additional_input": step.additional_input,
        "output": _as_text(step.output),
        "additional_output": additional_output,
        "artifacts": [v1_artifact(artifact) for artifact in step.artifacts.all()],
        "is_last": step.is_last or failed,
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
