"""Reads of interrupts: a run's held reply and the answers it goes on with, a thread's
conversation as AG-UI messages (what a run that stops on an interrupt sends before its end),
interrupts as AG-UI 1.0 shows them, and the caller's interrupts a page at a time."""

import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q

from agent_runs.errors import InterruptNotFound
from agent_runs.models import Interrupt, Message, Run, Visibility
from agent_runs.selectors.runs import thread_get_for_user
from agent_runs.selectors.threads import Page


@dataclass(frozen=True)
class HeldReply:
    """The reply a run goes on with: the agent state it was held in, the router's decision
    for it, the client's tools it was offered, the run holding the user message it answers,
    and the interrupts it stopped on (closed, in the order they were made)."""

    agent_state: dict[str, Any]
    decision: dict[str, Any]
    client_tools: list[dict[str, Any]]
    user_run_pk: int
    answers: list[Interrupt]


def held_reply_for(*, run: Run) -> HeldReply | None:
    """The held reply ``run`` goes on with (``None``: it answers a new user message)."""
    if run.continues_id is None:
        return None
    reply = Run.objects.values_list("suspended_reply", flat=True).get(pk=run.continues_id)
    if not reply:
        raise ValueError(f"run {run.continues_id} holds no reply to go on with")
    # Every interrupt of the held reply is closed by now (answered with this run, or one by
    # one before it); one that expired meanwhile goes on as cancelled.
    answers = list(Interrupt.objects.filter(run_id=run.continues_id).order_by("created_at", "id"))
    return HeldReply(
        agent_state=reply["agent_state"],
        decision=reply["decision"],
        client_tools=reply.get("client_tools", []),
        user_run_pk=reply["user_run_pk"],
        answers=answers,
    )


def open_interrupts_by_run(*, run_pks: Collection[int]) -> dict[int, list[Interrupt]]:
    """The pending interrupts of each of these runs that has some (a run that ended on them
    is ``completed``, yet waits: each protocol shows it as its own word for "input
    required"), in the order they were made."""
    found: dict[int, list[Interrupt]] = {}
    pending = Interrupt.objects.filter(run_id__in=run_pks, status=Interrupt.Status.PENDING)
    for interrupt in pending.order_by("created_at", "id"):
        found.setdefault(interrupt.run_id, []).append(interrupt)
    return found


def interrupt_as_agui(interrupt: Interrupt) -> dict[str, Any]:
    """An interrupt as AG-UI 1.0's ``Interrupt`` (camelCase, its tool and arguments in the
    metadata)."""
    return {
        "id": interrupt.id,
        "reason": interrupt.reason,
        "message": interrupt.message,
        "toolCallId": interrupt.tool_call_id,
        "responseSchema": interrupt.response_schema,
        "expiresAt": interrupt.expires_at.isoformat().replace("+00:00", "Z"),
        "metadata": {"toolName": interrupt.tool_name, "arguments": interrupt.arguments},
    }


@dataclass(frozen=True)
class InterruptPosition:
    """Where a page of interrupts ends: the last interrupt's creation time and id."""

    created_at: datetime
    interrupt_id: str


def interrupt_id_possible(interrupt_id: str) -> bool:
    """Whether an interrupt could have this id (one with a NUL, which PostgreSQL's text
    refuses, or longer than the column, names none)."""
    return "\x00" not in interrupt_id and len(interrupt_id) <= _ID_MAX_LENGTH


_ID_MAX_LENGTH = 40  # Interrupt.id's


def interrupt_get_for_user(*, user: AbstractBaseUser, interrupt_id: str) -> Interrupt:
    """One of the caller's interrupts, with its run (``InterruptNotFound`` otherwise)."""
    if not interrupt_id_possible(interrupt_id):
        raise InterruptNotFound(interrupt_id)
    interrupt = (
        Interrupt.objects.filter(pk=interrupt_id, thread__owner_id=user.pk)
        .select_related("run", "answered_by")
        .first()
    )
    if interrupt is None:
        raise InterruptNotFound(interrupt_id)
    return interrupt


def interrupts_page_for_user(
    *,
    user: AbstractBaseUser,
    thread_id: uuid.UUID | None,
    status: Interrupt.Status,
    after: InterruptPosition | None,
    limit: int,
) -> Page[Interrupt]:
    """The caller's interrupts of ``status``, newest first (``created_at``, then id), after
    ``after``: of the thread ``thread_id`` (a 404 when it is not the caller's), or of all
    the caller's threads; each with its run."""
    if thread_id is not None:
        interrupts = Interrupt.objects.filter(
            thread=thread_get_for_user(user=user, thread_id=thread_id)
        )
    else:
        interrupts = Interrupt.objects.filter(thread__owner_id=user.pk)
    interrupts = interrupts.filter(status=status).select_related("run")
    if after is not None:
        interrupts = interrupts.filter(
            Q(created_at__lt=after.created_at)
            | Q(created_at=after.created_at, id__lt=after.interrupt_id)
        )
    found = list(interrupts.order_by("-created_at", "-id")[: limit + 1])
    return Page(items=found[:limit], has_more=len(found) > limit)


def interrupt_listed(interrupt: Interrupt) -> dict[str, Any]:
    """An interrupt as AG-UI 1.0 gives it, with its thread, run and how it stands (what
    ``GET /api/v1/agent/interrupts`` lists; its run loaded)."""
    return {
        **interrupt_as_agui(interrupt),
        "threadId": str(interrupt.thread_id),
        "runId": interrupt.run.run_id,
        "kind": interrupt.kind,
        "status": interrupt.status,
        "toolName": interrupt.tool_name,
        "arguments": interrupt.arguments,
        "createdAt": _iso(interrupt.created_at),
    }


def interrupt_detail(interrupt: Interrupt) -> dict[str, Any]:
    """One interrupt as ``GET /api/v1/agent/interrupts/{id}`` answers it (and the user's
    webhook is told): listed, with its answer and the run that went on from it."""
    answered_by = interrupt.answered_by
    return {
        **interrupt_listed(interrupt),
        "answer": interrupt.answer,
        "continuedBy": answered_by.run_id if answered_by is not None else None,
    }


def _iso(moment: datetime) -> str:
    """As the API writes a time: ISO 8601 in UTC, ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def thread_conversation(*, thread_id: uuid.UUID) -> list[dict[str, Any]]:
    """The thread's conversation as AG-UI messages, with the ids its events gave them: each
    user message, each run's assistant message (its answer, with the tool calls it made)
    and the results of those calls; a tool call still waiting has no result yet."""
    rows = Message.objects.filter(thread_id=thread_id).order_by("seq")
    messages: list[dict[str, Any]] = []
    assistants: dict[str, dict[str, Any]] = {}
    for row in rows.values_list("message_id", "role", "content", "metadata", "visibility_mask"):
        message_id, role, content, metadata, mask = row
        if role == Message.Role.USER:
            messages.append({"id": message_id, "role": "user", "content": content})
        elif role == Message.Role.TOOL and metadata.get("stage") == "worker":
            assistant = _assistant(messages, assistants, metadata["run_id"])
            assistant["toolCalls"].append(_tool_call(metadata))
            messages.append(
                {
                    "id": message_id,
                    "role": "tool",
                    "toolCallId": metadata["tool_call_id"],
                    "content": content,
                }
            )
        elif role == Message.Role.ASSISTANT and mask & Visibility.UI_HISTORY:
            _assistant(messages, assistants, metadata.get("run_id", ""), message_id)["content"] = (
                content
            )
    return messages


def _assistant(
    messages: list[dict[str, Any]],
    assistants: dict[str, dict[str, Any]],
    run_id: str,
    message_id: str | None = None,
) -> dict[str, Any]:
    """The run's assistant message (``worker-<runId>``, the id its events gave it), added
    where the run's first tool call or answer comes."""
    message_id = message_id or f"worker-{run_id}"
    if message_id not in assistants:
        assistants[message_id] = {"id": message_id, "role": "assistant", "toolCalls": []}
        messages.append(assistants[message_id])
    return assistants[message_id]


def _tool_call(metadata: dict[str, Any]) -> dict[str, Any]:
    args = metadata.get("tool_call_args", "")
    return {
        "id": metadata["tool_call_id"],
        "type": "function",
        "function": {
            "name": metadata.get("tool_name", ""),
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }
