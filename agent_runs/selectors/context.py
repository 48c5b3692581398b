"""What a run's stages read: the thread's earlier messages each may see, and what is known
about the user."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_runs.db import columns_sql, db_param, json_column, model_from_row, rows_together
from agent_runs.models import Message, Run, UserMemory, Visibility


@dataclass(frozen=True)
class TurnReads:
    """What a run's job reads as it starts."""

    memory_notes: str
    user_message: Message
    contexts: dict[Visibility, list[tuple[str, str]]]


def turn_reads(
    *,
    user_run_pk: int,
    thread_id: uuid.UUID,
    user_id: int,
    memory_limit: int,
    consumers: Sequence[Visibility],
    token_budget: int,
) -> TurnReads:
    """What a run's job reads as it starts, in one round trip (``rows_together``): what the
    memory stage kept about the user, newest first (as prompt lines), the user message the
    run answers (the one of the run ``user_run_pk``), and the thread's earlier messages,
    those before that message, that each consumer (a stage of the run) may see
    (docs/spec/sse-events-and-usage.md, section 8: its bit of ``visibility_mask``; never
    those of a run rolled back, docs/protocols/multitask.md), as (role, content) oldest
    first: the newest that fit in ``token_budget`` (about four characters a token), one
    query for all the consumers. A tool result becomes an assistant note naming the tool,
    since a model's context takes tool results only right after its own calls."""
    user = Message.Role.USER.value
    memory, messages, context = rows_together(
        [
            (_MEMORY_ROWS, [user_id, memory_limit]),
            (_RUN_USER_MESSAGE, [user_run_pk, user]),
            _context_statement(thread_id, user_run_pk, consumers),
        ]
    )
    return TurnReads(
        memory_notes=_memory_notes(memory),
        user_message=_user_message(user_run_pk, messages),
        contexts={consumer: _context_of(context, consumer, token_budget) for consumer in consumers},
    )


def _context_statement(
    thread_id: uuid.UUID, user_run_pk: int, consumers: Sequence[Visibility]
) -> tuple[str, list[Any]]:
    any_of = 0
    for consumer in consumers:
        any_of |= int(consumer)
    roles = (Message.Role.USER, Message.Role.ASSISTANT, Message.Role.TOOL)
    params = [
        db_param(Message, "thread", thread_id),
        user_run_pk,
        Message.Role.USER.value,
        *roles,
        any_of,
        _CONTEXT_MESSAGES_MAX * len(consumers),
    ]
    return _CONTEXT_ROWS, params


def _context_of(
    rows: Sequence[tuple[Any, ...]], consumer: Visibility, token_budget: int
) -> list[tuple[str, str]]:
    """The newest of ``rows`` (newest first) the consumer may see that fit in the budget, as
    (role, content) oldest first."""
    chosen: list[tuple[str, str]] = []
    spent = 0
    for role, content, metadata, mask in rows:
        if not mask & int(consumer):
            continue
        if role == Message.Role.TOOL:
            tool = json_column(metadata).get("tool_name", "tool")
            role, content = "assistant", f"[{tool} result] {content}"
        spent += len(content) // 4 + 4
        if spent > token_budget or len(chosen) == _CONTEXT_MESSAGES_MAX:
            break
        chosen.append((role, content))
    return chosen[::-1]


_CONTEXT_MESSAGES_MAX = 200

# Every run reads these as its job starts: statements of constant text (the ORM compiled
# each again for every run), in SQL that PostgreSQL and SQLite both speak.
# A message of a run cancelled by a multitask ``rollback`` has left the conversation.
_CONTEXT_ROWS = (
    f"SELECT m.role, m.content, m.metadata, m.visibility_mask FROM {Message._meta.db_table} "
    "AS m WHERE m.thread_id = %s AND m.seq < ("
    # Before the user message of the run (none: no context; two: its job fails reading them).
    f"SELECT min(u.seq) FROM {Message._meta.db_table} AS u WHERE u.run_id = %s AND u.role = %s"
    ") AND m.role IN (%s, %s, %s) "
    "AND (m.visibility_mask & %s) > 0 AND NOT EXISTS (SELECT 1 FROM "
    f"{Run._meta.db_table} AS r WHERE r.id = m.run_id AND r.rolled_back) "
    "ORDER BY m.seq DESC LIMIT %s"
)
_MEMORY_ROWS = (
    f"SELECT id, kind, content FROM {UserMemory._meta.db_table} WHERE owner_id = %s "
    "ORDER BY created_at DESC, id DESC LIMIT %s"
)
_RUN_USER_MESSAGE = (
    f"SELECT {columns_sql(Message, 'm')} FROM {Message._meta.db_table} AS m "
    "WHERE m.run_id = %s AND m.role = %s"
)


def _memory_notes(rows: Sequence[tuple[Any, ...]]) -> str:
    """What the memory stage kept about the user, newest first, as prompt lines
    (``[id] kind: content``); empty when nothing is kept."""
    return "\n".join(f"[{pk}] {kind}: {content}" for pk, kind, content in rows)


def _user_message(run_pk: int, rows: Sequence[tuple[Any, ...]]) -> Message:
    """The user message a run answers (``Message.DoesNotExist`` when it has none)."""
    if not rows:
        raise Message.DoesNotExist(f"run {run_pk} has no user message")
    if len(rows) > 1:
        raise Message.MultipleObjectsReturned(f"run {run_pk} has {len(rows)} user messages")
    return model_from_row(Message, rows[0])


def user_memory_count(*, user_id: int) -> int:
    return UserMemory.objects.filter(owner_id=user_id).count()
