"""Stored messages as history messages (docs/spec/run-agent-input.md, HistoryMessage). Pure:
it reads the rows it is given; signing an attachment URL is a computation with the settings' key.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from agent_runs.models import Message, Visibility
from agent_runs.ui_schema import MAX_ITEMS, ui_schema_build
from attachments.errors import ObjectPathInvalid
from attachments.selectors import attachment_signed_url
from history.schemas import (
    HistoryAttachment,
    HistoryMessage,
    HistoryMessageAssistant,
    HistoryMessageReasoning,
    HistoryMessageUser,
    HistorySnapshotResponse,
)


@dataclass(frozen=True)
class HistoryDay:
    """One day of one thread: its visible messages in ``seq`` order."""

    thread_id: uuid.UUID | None
    day: date | None
    has_more: bool
    messages: list[Message]
    locale: str


def history_snapshot_response(*, day: HistoryDay) -> HistorySnapshotResponse:
    return HistorySnapshotResponse(
        thread_id=day.thread_id,
        day=day.day,
        has_more=day.has_more,
        messages=[history_message(message, locale=day.locale) for message in day.messages],
    )


_ATTACHMENT_KEYS = ("user_message_attachments", "user_message_attachments_all")


def history_message(message: Message, *, locale: str) -> HistoryMessage:
    """A user or assistant message, or a model's reasoning, as the history API shows it."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    if message.visibility_mask & Visibility.REASONING:
        stage = metadata.get("stage")
        return HistoryMessageReasoning(
            id=message.message_id,
            seq=message.seq,
            content=message.content,
            stage=stage if isinstance(stage, str) else None,
            timestamp=iso_timestamp(message.created_at),
        )
    if message.role == Message.Role.USER:
        return _history_user_message(message, metadata)
    return HistoryMessageAssistant(
        id=message.message_id,
        seq=message.seq,
        content=message.content,
        ui_schema=ui_schema_build(metadata.get("agent_output"), locale=locale),
        timestamp=iso_timestamp(message.created_at),
    )


def _history_user_message(message: Message, metadata: dict[str, Any]) -> HistoryMessageUser:
    stored = metadata.get("user_message_attachments")
    # With several images, ``user_message_attachments_all`` lists them all (the first is
    # also ``user_message_attachments``, the spec's one-object shape).
    every = metadata.get("user_message_attachments_all") or stored
    passed = {key: metadata[key] for key in _ATTACHMENT_KEYS if metadata.get(key)}
    return HistoryMessageUser(
        id=message.message_id,
        seq=message.seq,
        content=message.content,
        attachments=history_attachments(every),
        metadata=passed or None,
        timestamp=iso_timestamp(message.created_at),
    )


def history_attachments(stored: Any) -> list[HistoryAttachment]:
    """Freshly signed URLs for ``metadata.user_message_attachments``: a list of
    ``{bucket, path, mime_type}`` (or one such object, as docs/spec/chat-messages-and-attachments.md
    writes it). An entry without a safe bucket and path is skipped."""
    entries = [stored] if isinstance(stored, Mapping) else stored
    if not isinstance(entries, list):
        return []
    attachments = []
    for entry in entries[:MAX_ITEMS]:
        if not isinstance(entry, Mapping):
            continue
        bucket, path, mime_type = entry.get("bucket"), entry.get("path"), entry.get("mime_type")
        if not (isinstance(bucket, str) and isinstance(path, str)):
            continue
        try:
            url = attachment_signed_url(bucket=bucket, path=path)
        except ObjectPathInvalid:  # not a storage object we would sign today: not shown
            continue
        mime_type = mime_type if isinstance(mime_type, str) else "application/octet-stream"
        attachments.append(HistoryAttachment(mime_type=mime_type, url=url))
    return attachments


def iso_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with a ``Z``, to the millisecond (what a JavaScript ``Date`` keeps)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
