"""A task's control under the spec set (``POST /api/tasks/:taskId/pause|resume|cancel``,
docs/spec/agent-protocol-tasks.md): each acts on the task's latest run under the spec's
rules (a task waiting on an approval is stopped by declining it) and the task's status is
answered after."""

from agent_runs.errors import RunNotPaused
from agent_runs.models import RUN_ACTIVE_STATUSES, Run
from agent_runs.protocols.agent_protocol.errors import ApprovalAwaited, TaskEnded, TaskNotActive
from agent_runs.protocols.agent_protocol.outbound import run_task_status
from agent_runs.protocols.agent_protocol.selectors import (
    pending_approval_of_run,
    run_waits_on_interrupt,
)
from agent_runs.services.lifecycle import run_cancel, run_pause, run_resume


def task_status(run: Run | None) -> str:
    waits, abandoned = run_waits_on_interrupt(run=run)
    return run_task_status(run, waits=waits, abandoned=abandoned)


def task_pause(run: Run | None) -> Run:
    if run is None or run.status not in RUN_ACTIVE_STATUSES:
        raise TaskNotActive(task_status(run))
    return run_pause(run=run)


def task_resume(run: Run | None) -> Run:
    if run is None:
        raise RunNotPaused()
    waiting = pending_approval_of_run(run=run)
    if waiting is not None:
        raise ApprovalAwaited(waiting.id)
    return run_resume(run=run)


def task_cancel(run: Run | None) -> Run:
    if run is None:
        raise TaskNotActive(run_task_status(run))
    waiting = pending_approval_of_run(run=run)
    if waiting is not None:  # its run has ended: what stops the call is declining it
        raise ApprovalAwaited(waiting.id)
    if run.status in (Run.Status.COMPLETED, Run.Status.FAILED):
        raise TaskEnded(task_status(run))
    return run_cancel(run=run)
