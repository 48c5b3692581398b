"""What a run's stages read: the thread's earlier messages each may see, and what is known
about the user."""

import uuid
from collections.abc import Sequence

from django.db.models import F

from agent_runs.models import Message, UserMemory, Visibility


def context_messages_for(
    *,
    thread_id: uuid.UUID,
    before_seq: int,
    consumers: Sequence[Visibility],
    token_budget: int,
) -> dict[Visibility, list[tuple[str, str]]]:
    """The thread's earlier messages that each consumer (a stage of the run) may see
    (docs/spec/sse-events-and-usage.md, section 8: its bit of ``visibility_mask``), as (role,
    content) oldest first: the newest that fit in ``token_budget`` (about four characters a
    token). One query for all the consumers. A tool result becomes an assistant note naming
    the tool, since a model's context takes tool results only right after its own calls."""
    any_of = 0
    for consumer in consumers:
        any_of |= int(consumer)
    rows = (
        Message.objects.filter(
            thread_id=thread_id,
            seq__lt=before_seq,
            role__in=[Message.Role.USER, Message.Role.ASSISTANT, Message.Role.TOOL],
        )
        .alias(visible=F("visibility_mask").bitand(any_of))
        .filter(visible__gt=0)
        .order_by("-seq")
        .values_list("role", "content", "metadata", "visibility_mask")[
            : _CONTEXT_MESSAGES_MAX * len(consumers)
        ]
    )
    contexts: dict[Visibility, list[tuple[str, str]]] = {}
    for consumer in consumers:
        chosen: list[tuple[str, str]] = []
        spent = 0
        for role, content, metadata, mask in rows:
            if not mask & int(consumer):
                continue
            if role == Message.Role.TOOL:
                tool = metadata.get("tool_name", "tool")
                role, content = "assistant", f"[{tool} result] {content}"
            spent += len(content) // 4 + 4
            if spent > token_budget or len(chosen) == _CONTEXT_MESSAGES_MAX:
                break
            chosen.append((role, content))
        contexts[consumer] = chosen[::-1]
    return contexts


_CONTEXT_MESSAGES_MAX = 200


def user_memory_notes(*, user_id: int, limit: int) -> str:
    """What the memory stage kept about the user, newest first, as prompt lines
    (``[id] kind: content``); empty when nothing is kept."""
    rows = (
        UserMemory.objects.filter(owner_id=user_id)
        .order_by("-created_at", "-pk")
        .values_list("pk", "kind", "content")[:limit]
    )
    return "\n".join(f"[{pk}] {kind}: {content}" for pk, kind, content in rows)


def user_memory_count(*, user_id: int) -> int:
    return UserMemory.objects.filter(owner_id=user_id).count()
