"""The Agent API's reads: what a response object says beyond the journal (``ResponseFacts``)
and a run's stored events, for the translator (outbound.py)."""

from typing import Any

from agent_runs.events.reads import run_event_payloads
from agent_runs.models import RUN_ACTIVE_STATUSES, Run
from agent_runs.protocols.agent_api.outbound import ResponseFacts, response_current
from agent_runs.selectors.usage import run_usage_summary

# How this protocol marks the runs it creates in ``Run.request`` (``Run.protocol`` too).
PROTOCOL = "agent_api"


def run_request_kept(*, session_id: str, kept: dict[str, Any]) -> dict[str, Any]:
    """What a run created here keeps of its request (``Run.request``)."""
    return {"protocol": PROTOCOL, "session_id": session_id, "kept": kept}


def response_facts(*, run: Run) -> ResponseFacts:
    """The run's facts as they stand: its end and usage once it has ended. A run another
    protocol created answers its thread id as its session."""
    own = run.protocol == Run.Protocol.AGENT_API
    facts = ResponseFacts(
        response_id=run.run_id,
        session_id=str(run.request["session_id"]) if own else str(run.thread_id),
        created_at=int(run.created_at.timestamp()),
        request=dict(run.request.get("kept", {})) if own else {},
    )
    if run.status in RUN_ACTIVE_STATUSES or run.finished_at is None:
        return facts
    return ResponseFacts(
        response_id=facts.response_id,
        session_id=facts.session_id,
        created_at=facts.created_at,
        completed_at=int(run.finished_at.timestamp()),
        usage=run_usage(run=run),
        request=facts.request,
    )


def response_facts_ended(*, run_pk: int) -> ResponseFacts:
    """The facts of a run whose terminal event has just been seen (both are final then)."""
    return response_facts(run=Run.objects.get(pk=run_pk))


def run_usage(*, run: Run) -> dict[str, int]:
    """The run's usage (billing's ``UsageRecord`` of every model call recorded by its end)."""
    summary = run_usage_summary(run=run, recorded_by=run.finished_at)
    return {
        "input_tokens": summary.input_tokens,
        "output_tokens": summary.output_tokens,
        "total_tokens": summary.total_tokens,
    }


def response_object(*, run: Run) -> dict[str, Any]:
    """The run's latest response object (its final one once it has ended), as its stream
    last said it, or will say it (a run cancelled while queued behind another)."""
    run.refresh_from_db()
    return response_current(
        response_facts(run=run),
        run_event_payloads(run=run),
        cancelled=run.status == Run.Status.CANCELLED,
    )
