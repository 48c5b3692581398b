"""Reads of a thread's messages as a client knows them."""

import uuid
from collections.abc import Collection

from django.db.models import Q

from agent_runs.models import Message, RunEvent

# The events that give a client's copy of the conversation its message ids: an AG-UI client
# makes a message of each text message, of each reasoning message, of each tool call's
# assistant message (its parent message, or the tool call itself without one) and of each
# tool result.
_ID_FIELDS = {
    "TEXT_MESSAGE_START": ("messageId",),
    "REASONING_MESSAGE_START": ("messageId",),
    "TOOL_CALL_START": ("parentMessageId", "toolCallId"),
    "TOOL_CALL_RESULT": ("messageId",),
}


def thread_message_ids_known(
    *, thread_id: uuid.UUID, ids: Collection[str], streamed: bool = True
) -> set[str]:
    """Which of ``ids`` name a message of the thread: a stored message, or (``streamed``)
    one its events streamed to the client (say, the router's reply, never stored as a
    message), which takes a look through the thread's events."""
    wanted = set(ids)
    known = set(
        Message.objects.filter(thread_id=thread_id, message_id__in=wanted).values_list(
            "message_id", flat=True
        )
    )
    rest = wanted - known
    if not rest or not streamed:
        return known
    named = Q()
    for fields in _ID_FIELDS.values():
        for field in fields:
            named |= Q(**{f"payload__{field}__in": sorted(rest)})
    payloads = RunEvent.objects.filter(thread_id=thread_id, type__in=_ID_FIELDS).filter(named)
    for kind, payload in payloads.values_list("type", "payload"):
        known.update(payload.get(field) for field in _ID_FIELDS[kind] if payload.get(field) in rest)
    return known
