"""Reads of a response's approvals: the approval requests (interrupts) a response asked, the
one a continuing response answers, and the response an answered one went on in.
docs/protocols/openai-responses.md, Approvals."""

from agent_runs.models import Interrupt, Run


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
