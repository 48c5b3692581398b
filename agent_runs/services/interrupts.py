"""Writes of interrupts: a run that stops on tool calls waiting for an answer (an approval,
a client's own tool), the rules a turn on its thread meets, the run that answers them, and
their expiry.

A run whose reply stops on such calls ends with the reply held (``Run.suspended_reply``) and
an ``Interrupt`` row per call. The thread then takes no new user message until they are
answered: the answering run is created with the answers (each interrupt resolved, or
cancelled, in the same transaction, under the thread's row lock: of two answers at once
exactly one wins) and goes on from the held reply. The sweeper expires those left
unanswered past ``INTERRUPT_TTL_SECONDS``; the thread is then free again.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent_runs.errors import (
    InterruptClosed,
    InterruptExpired,
    InterruptNotAnApproval,
    InterruptNotFound,
    InterruptOpen,
    ResumeIncomplete,
    ResumePayloadInvalid,
    RunInputInvalid,
    RunNoLongerRunning,
    ToolCallsPending,
    ToolCallUnknown,
)
from agent_runs.models import Interrupt, Run, Thread
from agent_runs.run_input import InputMessage, RunAgentInput, snapshot_sha256
from agent_runs.selectors.interrupts import interrupt_id_possible
from agent_runs.services.queue import run_enqueue
from agent_runs.services.run_request import STEP_BUDGET_KEY
from agent_runs.services.webhooks import interrupts_opened_push
from agent_runs.signals import run_status_changed_send, run_status_heard
from agent_runs.tracing import with_trace_context

# AG-UI's reasons: an approval of a backend tool, and a client's tool call (which AG-UI
# reports as a pending tool call, not as an interrupt).
APPROVAL_REASON = "tool_approval"
CLIENT_TOOL_REASON = "tool_call"


@dataclass(frozen=True)
class HeldCall:
    """A tool call a reply stopped on."""

    kind: Interrupt.Kind
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    message: str
    response_schema: dict[str, Any] | None


def approval_schema(tool_input_schema: dict[str, Any]) -> dict[str, Any]:
    """The answer an approval takes: ``approved``, and optionally the call's ``arguments``
    edited (valid for the tool's own schema) and a ``reason``."""
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "arguments": tool_input_schema,
            "reason": {"type": "string", "maxLength": 2000},
        },
        "required": ["approved"],
        "additionalProperties": False,
    }


def run_suspend(
    *, run: Run, claim_token: uuid.UUID, reply: dict[str, Any], held: Sequence[HeldCall]
) -> list[Interrupt]:
    """Keep the run's held reply and an interrupt per held call, while the run is still its
    job's (``RunNoLongerRunning`` otherwise, nothing kept)."""
    now = timezone.now()
    expires_at = now + timedelta(seconds=settings.INTERRUPT_TTL_SECONDS)
    interrupts = [
        _interrupt_of(run=run, call=call, now=now, expires_at=expires_at) for call in held
    ]
    with transaction.atomic():
        kept = Run.objects.filter(
            pk=run.pk, status=Run.Status.RUNNING, claim_token=claim_token
        ).update(suspended_reply=reply)
        if not kept:
            raise RunNoLongerRunning(run.pk)
        Interrupt.objects.bulk_create(interrupts)
        # The owner's own webhook is told of them (issue 31, item 5): its outbox rows commit
        # with the interrupts, or roll back with them.
        interrupts_opened_push(run=run, interrupts=interrupts)
    return interrupts


def _interrupt_of(*, run: Run, call: HeldCall, now: datetime, expires_at: datetime) -> Interrupt:
    return Interrupt(
        id=f"int-{uuid.uuid4().hex}",
        thread_id=run.thread_id,
        run=run,
        kind=call.kind,
        reason=APPROVAL_REASON if call.kind == Interrupt.Kind.APPROVAL else CLIENT_TOOL_REASON,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        message=call.message,
        response_schema=call.response_schema,
        expires_at=expires_at,
        created_at=now,
    )


@dataclass(frozen=True)
class Answers:
    """What a turn answers of its thread's open interrupts: the run whose reply they held,
    and per interrupt its new status and answer."""

    continues: Run | None
    closed: dict[str, tuple[Interrupt.Status, dict[str, Any]]]


def turn_answers_check(
    *, thread: Thread, run_input: RunAgentInput, tool_message_ids: set[str]
) -> Answers:
    """The thread's open interrupts against the turn, under the thread's row lock (nothing
    written). A turn that goes on with the held reply (``continues_reply``) must answer
    every open interrupt, each valid; a new user message is refused while an approval is
    open, or while a client's tool call is pending that the turn does not answer (answered,
    they are closed with the turn and the held reply is left). ``tool_message_ids``: the
    turn's tool messages new to the thread (the others are results it holds already)."""
    pending = list(Interrupt.objects.filter(thread=thread, status=Interrupt.Status.PENDING))
    tool_answers = [m for m in run_input.tool_answers if m.id in tool_message_ids]
    continues = run_input.continues_reply and bool(run_input.resume or tool_answers)
    if not continues and not run_input.continues_reply:
        _new_message_check(pending, run_input, tool_answers)
    elif not continues:
        raise RunInputInvalid("RunAgentInput.messages must end with the new user message")
    closed = _resume_answers(thread, pending, run_input)
    closed.update(_tool_answers(pending, tool_answers, closed))
    if continues:
        missing = [
            item.id if item.kind == Interrupt.Kind.APPROVAL else item.tool_call_id
            for item in pending
            if item.id not in closed
        ]
        if missing:
            raise ResumeIncomplete(missing)
    return Answers(continues=pending[0].run if continues and pending else None, closed=closed)


def _new_message_check(
    pending: list[Interrupt], run_input: RunAgentInput, tool_answers: list[InputMessage]
) -> None:
    approvals = [item for item in pending if item.kind == Interrupt.Kind.APPROVAL]
    if approvals and not run_input.resume:
        raise InterruptOpen(approvals[0].id)
    answered = {message.tool_call_id for message in tool_answers}
    unanswered = [
        item.tool_call_id
        for item in pending
        if item.kind == Interrupt.Kind.CLIENT_TOOL and item.tool_call_id not in answered
    ]
    if unanswered:
        raise ToolCallsPending(unanswered)


def _resume_answers(
    thread: Thread, pending: list[Interrupt], run_input: RunAgentInput
) -> dict[str, tuple[Interrupt.Status, dict[str, Any]]]:
    by_id = {item.id: item for item in pending}
    now = timezone.now()
    closed: dict[str, tuple[Interrupt.Status, dict[str, Any]]] = {}
    for entry in run_input.resume:
        interrupt = by_id.get(entry.interrupt_id)
        if interrupt is None:
            _not_open(thread, entry.interrupt_id)
        assert interrupt is not None
        if interrupt.expires_at <= now:
            raise InterruptExpired(interrupt.id)
        if entry.status == "cancelled":
            closed[interrupt.id] = (Interrupt.Status.CANCELLED, {"payload": entry.payload})
            continue
        _payload_check(interrupt, entry.payload)
        closed[interrupt.id] = (Interrupt.Status.RESOLVED, {"payload": entry.payload})
    return closed


def _not_open(thread: Thread, interrupt_id: str) -> None:
    """Raise why the thread has no open interrupt of this id."""
    status = (
        Interrupt.objects.filter(thread=thread, id=interrupt_id)
        .values_list("status", flat=True)
        .first()
    )
    if status is None:
        raise InterruptNotFound(interrupt_id)
    if status == Interrupt.Status.EXPIRED:
        raise InterruptExpired(interrupt_id)
    raise InterruptClosed(interrupt_id, status)


def _payload_check(interrupt: Interrupt, payload: Any) -> None:
    """The payload meets the interrupt's ``responseSchema`` (the first error, by place)."""
    if interrupt.response_schema is None:
        return
    try:
        validator = Draft202012Validator(interrupt.response_schema)
        error = next(iter(sorted(validator.iter_errors(payload), key=lambda e: list(e.path))), None)
    except SchemaError:  # a tool's own schema that is not one: its answer is not checked
        return
    if error is not None:
        place = "payload" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.path
        )
        raise ResumePayloadInvalid(interrupt.id, place, error.message[:200])


def _tool_answers(
    pending: list[Interrupt],
    tool_answers: list[InputMessage],
    closed: dict[str, tuple[Interrupt.Status, dict[str, Any]]],
) -> dict[str, tuple[Interrupt.Status, dict[str, Any]]]:
    by_call = {
        item.tool_call_id: item for item in pending if item.kind == Interrupt.Kind.CLIENT_TOOL
    }
    answers: dict[str, tuple[Interrupt.Status, dict[str, Any]]] = {}
    for message in tool_answers:
        call_id = message.tool_call_id or ""
        interrupt = by_call.get(call_id)
        if interrupt is None or interrupt.id in closed or interrupt.id in answers:
            raise ToolCallUnknown(call_id)
        content = message.content if isinstance(message.content, str) else ""
        answers[interrupt.id] = (
            Interrupt.Status.RESOLVED,
            {"result": content, "error": message.error},
        )
    return answers


def interrupts_close(*, answers: Answers, run: Run) -> None:
    """Close the interrupts the turn answered, with ``run`` as their answer (in the
    transaction that creates it); when it goes on with a held reply, the run is the answer
    of those answered one by one before it too."""
    now = timezone.now()
    for interrupt_id, (status, answer) in answers.closed.items():
        Interrupt.objects.filter(pk=interrupt_id, status=Interrupt.Status.PENDING).update(
            status=status, answer=answer, answered_by=run, closed_at=now
        )
    if answers.continues is not None:
        Interrupt.objects.filter(run=answers.continues, answered_by=None).exclude(
            status=Interrupt.Status.PENDING
        ).update(answered_by=run)


def interrupt_answer(
    *, user: AbstractBaseUser, interrupt_id: str, payload: Any
) -> tuple[Interrupt, Run | None]:
    """Answer one open approval outside a run (a person in an inbox, another system), by
    the rules a resume meets (``InterruptNotFound`` for a stranger's); nothing is written
    when one is broken. Once its run's last open interrupt is answered, the run that goes on
    with the held reply is created (and queued): it is returned, else ``None``. Under the
    thread's row lock: of two answers at once, exactly one wins."""
    if not interrupt_id_possible(interrupt_id):
        raise InterruptNotFound(interrupt_id)
    thread_id = (
        Interrupt.objects.filter(pk=interrupt_id, thread__owner_id=user.pk)
        .values_list("thread_id", flat=True)
        .first()
    )
    if thread_id is None:
        raise InterruptNotFound(interrupt_id)
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        interrupt = Interrupt.objects.select_related("run").get(pk=interrupt_id)
        _approval_answerable(thread, interrupt, payload)
        Interrupt.objects.filter(pk=interrupt.pk).update(
            status=Interrupt.Status.RESOLVED, answer={"payload": payload}, closed_at=timezone.now()
        )
        interrupt.refresh_from_db()
        if Interrupt.objects.filter(run=interrupt.run, status=Interrupt.Status.PENDING).exists():
            return interrupt, None
        run = _continuation_create(thread, interrupt.run)
    return interrupt, run


def _approval_answerable(thread: Thread, interrupt: Interrupt, payload: Any) -> None:
    """An open approval, not expired, ``payload`` an answer its schema takes; else the
    ``DomainError`` that says why."""
    if interrupt.status != Interrupt.Status.PENDING:
        _not_open(thread, interrupt.id)
    if interrupt.expires_at <= timezone.now():
        raise InterruptExpired(interrupt.id)
    if interrupt.kind != Interrupt.Kind.APPROVAL:
        raise InterruptNotAnApproval(interrupt.id)
    _payload_check(interrupt, payload)


def _continuation_create(thread: Thread, held: Run) -> Run:
    """The run that goes on with ``held``'s reply once its interrupts are all answered
    outside a run: its input the held run's, with no message; in the held run's chain
    (``parentRunId``: the run that started it), so each protocol sees it as the same
    conversation's next run."""
    run_id = f"resume-{uuid.uuid4().hex[:16]}"
    snapshot = {
        **{key: value for key, value in held.input.items() if key != "resume"},
        "runId": run_id,
        "messages": [],
        "tools": [],
    }
    run = Run.objects.create(
        thread=thread,
        run_id=run_id,
        parent_run_id=held.parent_run_id or held.run_id,
        continues=held,
        runtime_mode=held.runtime_mode,
        protocol=held.protocol,
        input=snapshot,
        input_sha256=snapshot_sha256(snapshot),
        client_time=held.client_time,
        automation_job=held.automation_job,
        # As the held run went (its answer kept as an artifact where it was), straight
        # through: its step budget is not the new run's.
        request=with_trace_context(
            {key: value for key, value in held.request.items() if key != STEP_BUDGET_KEY}
        ),
    )
    Interrupt.objects.filter(run=held, answered_by=None).exclude(
        status=Interrupt.Status.PENDING
    ).update(answered_by=run)
    transaction.on_commit(partial(run_enqueue, run=run))
    return run


def interrupts_expire() -> int:
    """Expire the interrupts left unanswered past their time (the sweeper); how many. A run
    left with none open is told to the edges (``run_status_changed``, its status as it
    stands: what its protocols show of it changed, say an A2A task now failed), in the
    transaction that expires them."""
    now = timezone.now()
    with transaction.atomic():
        # Those an answer is closing right now are left to it (skipped, not waited for).
        due = list(
            Interrupt.objects.select_for_update(skip_locked=True)
            .filter(status=Interrupt.Status.PENDING, expires_at__lte=now)
            .values_list("pk", "run_id")
        )
        count = Interrupt.objects.filter(pk__in=[pk for pk, _ in due]).update(
            status=Interrupt.Status.EXPIRED, closed_at=now
        )
        run_pks = {run_pk for _, run_pk in due}
        if run_status_heard():
            still_open = set(
                Interrupt.objects.filter(
                    run_id__in=run_pks, status=Interrupt.Status.PENDING
                ).values_list("run_id", flat=True)
            )
            for run in Run.objects.filter(pk__in=run_pks - still_open).select_related("thread"):
                run_status_changed_send(run_pk=run.pk, status=Run.Status(run.status), run=run)
    return count


def interrupts_withdraw(*, thread: Thread, strategy: str) -> set[int]:
    """Close the thread's open interrupts as cancelled: a new user message sent with the
    ``interrupt`` or ``rollback`` strategy (docs/protocols/multitask.md) goes on without
    their answer. Under the thread's row lock, in the transaction that creates that run.
    Returns the runs that waited on them."""
    pending = Interrupt.objects.filter(thread=thread, status=Interrupt.Status.PENDING)
    held = set(pending.values_list("run_id", flat=True))
    pending.update(
        status=Interrupt.Status.CANCELLED,
        answer={"withdrawn": strategy},
        closed_at=timezone.now(),
    )
    return held
