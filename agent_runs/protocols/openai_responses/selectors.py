"""Reads of a response: the ``Response`` a run's rows hold (its head, usage and journal), and
its approvals: the approval requests (interrupts) a response asked, the one a continuing
response answers, and the response an answered one went on in.
docs/protocols/openai-responses.md, Approvals."""

from typing import Any

from agent_runs.events.reads import run_event_payloads
from agent_runs.models import RUN_ENDED_STATUSES, Interrupt, Run
from agent_runs.protocols.openai_responses.outbound import response_of_journal, usage_object
from agent_runs.selectors.usage import run_usage_summary


def response_approval_ids(*, run: Run) -> set[str]:
    """The ids of the approval requests the response (run) stopped on, whatever their state."""
    return set(
        Interrupt.objects.filter(run=run, kind=Interrupt.Kind.APPROVAL).values_list("id", flat=True)
    )


def answered_approvals(*, run: Run) -> dict[str, str]:
    """For a run that goes on with a held reply: the approval request of each call it was
    held on, by tool call id (none for any other run)."""
    if run.continues_id is None:
        return {}
    rows = Interrupt.objects.filter(run_id=run.continues_id, kind=Interrupt.Kind.APPROVAL)
    return dict(rows.values_list("tool_call_id", "id"))


def continued_response_id(*, run: Run) -> str | None:
    """The response whose held reply ``run`` goes on with (``None``: it answers a message)."""
    if run.continues_id is None:
        return None
    return Run.objects.values_list("run_id", flat=True).filter(pk=run.continues_id).first()


def approval_answered_by(*, approval_request_id: str) -> str | None:
    """The response (run) that went on with an answered approval request, if any yet."""
    return (
        Interrupt.objects.filter(pk=approval_request_id)
        .values_list("answered_by__run_id", flat=True)
        .first()
    )


_STATUSES = {
    Run.Status.QUEUED: "queued",
    Run.Status.RUNNING: "in_progress",
    Run.Status.PAUSED: "in_progress",
    Run.Status.COMPLETED: "completed",
    Run.Status.FAILED: "failed",
    Run.Status.CANCELLED: "cancelled",
}


def response_head(run: Run) -> dict[str, Any]:
    """The ``Response`` fields the run row and its request hold (not the journal). A run
    that goes on with a held reply follows the response held, however it was answered
    (its ``previous_response_id``)."""
    asked = run.request or {}
    previous = continued_response_id(run=run) or asked.get("previous_response_id")
    return {
        "id": run.run_id,
        "created_at": int(run.created_at.timestamp()),
        "model": asked.get("model") or "agent",
        "instructions": asked.get("instructions"),
        "metadata": asked.get("metadata") or {},
        "background": bool(asked.get("background")),
        "previous_response_id": previous,
        "conversation": asked.get("conversation"),
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    }


def run_usage(run: Run) -> dict[str, Any]:
    """``Response.usage``: the run's usage, summed over the model calls recorded by its end."""
    summary = run_usage_summary(run=run, recorded_by=run.finished_at)
    return usage_object(
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        cached_tokens=summary.cached_prompt_tokens,
        reasoning_tokens=summary.reasoning_tokens,
    )


def response_now(run: Run) -> dict[str, Any]:
    """The ``Response`` of a run as its rows hold it now."""
    run.refresh_from_db()
    ended = run.status in RUN_ENDED_STATUSES
    return response_of_journal(
        head=response_head(run),
        payloads=run_event_payloads(run=run),
        status=_STATUSES[Run.Status(run.status)],
        usage=run_usage(run) if ended else None,
        approvals=answered_approvals(run=run),
    )
