"""Writes of a thread's messages: appending in ``seq`` order, and a stage's messages."""

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agent_runs.errors import RunNoLongerRunning
from agent_runs.models import Message, Run, Thread, Visibility


@dataclass(frozen=True)
class MessageDraft:
    """A message to append to a thread (its ``seq`` comes from the thread)."""

    role: Message.Role
    message_id: str
    content: str
    content_blocks: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    visibility: Visibility = Visibility.ALL

    def message(self, *, thread: Thread, run: Run | None, seq: int) -> Message:
        """The row of this message, ``seq`` in its thread."""
        return Message(
            thread=thread,
            run=run,
            seq=seq,
            message_id=self.message_id,
            role=self.role,
            content=self.content,
            content_blocks=self.content_blocks,
            metadata=self.metadata,
            visibility_mask=int(self.visibility),
        )


def messages_append(*, thread: Thread, run: Run | None, drafts: Sequence[MessageDraft]) -> None:
    """Append messages with the thread's next ``seq`` numbers, in two statements however
    many there are. The caller holds the thread's row lock (``select_for_update``, or it
    created the thread) inside a transaction."""
    first_seq = thread.last_seq + 1
    thread.last_seq += len(drafts)
    thread.save(update_fields=["last_seq", "updated_at"])
    Message.objects.bulk_create(
        [
            draft.message(thread=thread, run=run, seq=first_seq + index)
            for index, draft in enumerate(drafts)
        ]
    )


def tool_message_id(tool_call_id: str) -> str:
    """The id of the tool message that holds a tool call's result: its own, not the id of
    the assistant message that made the call (``TOOL_CALL_RESULT.messageId``)."""
    return f"tool-{tool_call_id}"


@dataclass(frozen=True)
class ToolResult:
    """One tool call of a stage, as its tool message keeps it."""

    tool_call_id: str
    tool_name: str
    args: str
    result: str


@dataclass(frozen=True)
class ReasoningText:
    """One reasoning message of a stage (a model's ``reasoning_content``), as streamed."""

    message_id: str
    text: str


@dataclass(frozen=True)
class StageAnswer:
    """The assistant message a stage answered with."""

    message_id: str
    content: str
    metadata: dict[str, Any]


def run_stage_messages_store(
    *,
    run: Run,
    claim_token: uuid.UUID,
    stage: str,
    tool_results: Sequence[ToolResult],
    answer: StageAnswer | None,
    reasoning: Sequence[ReasoningText] = (),
) -> None:
    """A stage's reasoning (shown in the history only when asked for, never in a stage's
    context), its tool results (kept for the stages' context, never shown in the history)
    and its answer, in one transaction, while the run is still running under the job's
    claim: a run cancelled meanwhile, or a job that lost its claim, keeps nothing
    (``RunNoLongerRunning``). docs/spec/chat-messages-and-attachments.md, Message Metadata."""
    drafts = [reasoning_draft(run=run, stage=stage, reasoning=part) for part in reasoning]
    drafts += [_tool_result_draft(run=run, stage=stage, tool=tool) for tool in tool_results]
    if answer is not None:
        drafts.append(
            MessageDraft(
                role=Message.Role.ASSISTANT,
                message_id=answer.message_id,
                content=answer.content,
                metadata=answer.metadata,
            )
        )
    if drafts and connection.vendor == "postgresql":
        if not _append_claimed(run=run, claim_token=claim_token, drafts=drafts):
            raise RunNoLongerRunning(run.pk)
        return
    _append_locked(run=run, claim_token=claim_token, drafts=drafts)


def _tool_result_draft(*, run: Run, stage: str, tool: ToolResult) -> MessageDraft:
    """A tool call's result as the thread keeps it: for the stages' context only."""
    return MessageDraft(
        role=Message.Role.TOOL,
        message_id=tool_message_id(tool.tool_call_id),
        content=tool.result,
        metadata={
            "run_id": run.run_id,
            "stage": stage,
            "message_id": tool_message_id(tool.tool_call_id),
            "tool_call_id": tool.tool_call_id,
            "tool_name": tool.tool_name,
            "tool_call_args": tool.args,
        },
        visibility=Visibility.CONTEXT,
    )


def _append_locked(*, run: Run, claim_token: uuid.UUID, drafts: list[MessageDraft]) -> None:
    """The drafts appended with the ORM (SQLite; or no drafts, to check the claim only)."""
    with transaction.atomic():
        # One statement locks both rows: the run (against a cancel) and its thread (for seq).
        thread = (
            Thread.objects.select_for_update()
            .filter(
                pk=run.thread_id,
                runs__pk=run.pk,
                runs__status=Run.Status.RUNNING,
                runs__claim_token=claim_token,
            )
            .first()
        )
        if thread is None:
            raise RunNoLongerRunning(run.pk)
        if drafts:
            messages_append(thread=thread, run=run, drafts=drafts)


def reasoning_draft(*, run: Run, stage: str, reasoning: ReasoningText) -> MessageDraft:
    """A reasoning message as the thread keeps it: the assistant's, under the id its events
    gave it (so a client that sends its conversation back names a message the thread has),
    visible to ``?include=reasoning`` only."""
    return MessageDraft(
        role=Message.Role.ASSISTANT,
        message_id=reasoning.message_id,
        content=reasoning.text,
        metadata={
            "run_id": run.run_id,
            "stage": stage,
            "message_id": reasoning.message_id,
            "reasoning": True,
        },
        visibility=Visibility.REASONING,
    )


def _append_claimed(*, run: Run, claim_token: uuid.UUID, drafts: list[MessageDraft]) -> bool:
    """The drafts appended on PostgreSQL in one statement of constant text (the thread's
    ``seq`` moved on and the rows inserted, fenced on the claim, the run's row shared
    against a cancel as the journal's writes share it); whether the run was still the
    job's."""
    rows = [
        (
            draft.message_id,
            draft.role.value,
            draft.content,
            json.dumps(draft.content_blocks),
            json.dumps(draft.metadata),
            int(draft.visibility),
        )
        for draft in drafts
    ]
    columns = [list(column) for column in zip(*rows, strict=True)]
    now = timezone.now()
    params: list[Any] = [
        *(len(drafts), now, run.thread_id, run.pk, Run.Status.RUNNING.value, claim_token),
        *(len(drafts), run.thread_id, run.pk, now, *columns),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_APPEND_CLAIMED, params)
        return bool(cursor.fetchall())


_APPEND_CLAIMED = (
    f"WITH bumped AS (UPDATE {Thread._meta.db_table} AS t "
    "SET last_seq = t.last_seq + %s, updated_at = %s WHERE t.id = %s AND EXISTS ("
    f"SELECT 1 FROM {Run._meta.db_table} AS r WHERE r.id = %s AND r.thread_id = t.id "
    "AND r.status = %s AND r.claim_token = %s FOR SHARE) RETURNING t.last_seq - %s AS base) "
    f"INSERT INTO {Message._meta.db_table} (thread_id, run_id, seq, message_id, role, content, "
    "content_blocks, metadata, visibility_mask, created_at) "
    "SELECT %s, %s, bumped.base + v.ord, v.message_id, v.role, v.content, v.blocks::jsonb, "
    "v.metadata::jsonb, v.visibility, %s FROM bumped CROSS JOIN unnest("
    "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::integer[]) "
    "WITH ORDINALITY AS v(message_id, role, content, blocks, metadata, visibility, ord) "
    "RETURNING id"
)
