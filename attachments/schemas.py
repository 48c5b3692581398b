"""Protocol shapes of attachments (docs/spec/chat-messages-and-attachments.md, Metadata Schema)."""

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from agent_runs.ports import StoredImage


class UserMessageAttachments(TypedDict):
    """``metadata.user_message_attachments`` of a user message."""

    bucket: str
    path: str
    mime_type: str


def user_message_attachments(attachment: StoredImage) -> UserMessageAttachments:
    return UserMessageAttachments(
        bucket=attachment.bucket, path=attachment.path, mime_type=attachment.mime_type
    )


def user_message_attachments_metadata(
    attachments: Sequence[StoredImage],
) -> dict[str, UserMessageAttachments | list[UserMessageAttachments]]:
    """The keys a user message's ``metadata`` gets for its images, in block order.

    The spec's ``user_message_attachments`` is one object, so: one image gives exactly that
    shape; with two or three, ``user_message_attachments`` is still the first (readers of the
    spec shape see an image) and ``user_message_attachments_all`` lists every one, the first
    included. No images: no keys.
    """
    shapes = [user_message_attachments(attachment) for attachment in attachments]
    if not shapes:
        return {}
    if len(shapes) == 1:
        return {"user_message_attachments": shapes[0]}
    return {"user_message_attachments": shapes[0], "user_message_attachments_all": shapes}


def user_message_attachment_refs(metadata: Any) -> set[tuple[str, str]]:
    """The ``(bucket, path)`` of every image a user message's ``metadata`` names (both keys
    above); anything malformed is skipped."""
    if not isinstance(metadata, Mapping):
        return set()
    entries: list[Any] = []
    for key in ("user_message_attachments", "user_message_attachments_all"):
        value = metadata.get(key)
        entries.extend(value if isinstance(value, list) else [value])
    return {
        (entry["bucket"], entry["path"])
        for entry in entries
        if isinstance(entry, Mapping)
        and isinstance(entry.get("bucket"), str)
        and isinstance(entry.get("path"), str)
    }
