"""The checks ``run_create`` makes of a new run (services/runs.py) before and under its
thread's row lock: its messages against the thread's, its images, its automation job, and
whether it is a retry."""

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from agent_runs import ports
from agent_runs.agent_config import automation_job_get
from agent_runs.errors import (
    ConversationMessageRepeated,
    ConversationMessageUnknown,
    RunInputInvalid,
)
from agent_runs.events.reads import thread_message_ids_known
from agent_runs.models import Run, Thread
from agent_runs.ports import StoredImage
from agent_runs.run_input import RunAgentInput


def conversation_check(
    *,
    thread: Thread,
    new_message_id: str | None,
    earlier_message_ids: Sequence[str],
    tool_message_ids: Sequence[str] = (),
) -> set[str]:
    """The run's user message is new to the thread, and the messages the client says came
    before it (none, unless it holds the conversation) are the thread's. A user message is
    always stored, so without earlier messages to find the stored ones suffice (the events,
    a long thread's many rows, are looked through for a client's conversation only)."""
    new = {new_message_id} if new_message_id is not None else set()
    known = thread_message_ids_known(
        thread_id=thread.pk,
        ids={*new, *earlier_message_ids, *tool_message_ids},
        streamed=bool(earlier_message_ids or tool_message_ids),
    )
    if new_message_id in known:
        raise ConversationMessageRepeated(new_message_id)
    for message_id in earlier_message_ids:
        if message_id not in known:
            raise ConversationMessageUnknown(message_id)
    return set(tool_message_ids) - known


def binary_blocks_resolve(*, user: AbstractBaseUser, snapshot: dict[str, Any]) -> list[StoredImage]:
    """Turn each image's signed URL in the snapshot's user message into its storage place
    (``bucket``, ``path``, the sniffed ``mimeType``), and give the attachments, in order
    (docs/spec/run-agent-input.md, Compatibility Notes). A URL that is not a valid, unexpired
    signed URL of an object of the caller's is an ``AttachmentUrlInvalid`` (422), before
    anything is stored."""
    messages = snapshot["messages"]
    content = messages[0].get("content") if messages and messages[0]["role"] == "user" else None
    if not isinstance(content, list):
        return []
    images: list[StoredImage] = []
    attachments = ports.attachments()
    for index, block in enumerate(content):
        if block.get("type") != "binary":
            continue
        image = attachments.image_from_signed_url(user=user, url=block["url"])
        images.append(image)
        kept = {key: value for key, value in block.items() if key != "url"}
        content[index] = {
            **kept,
            "mimeType": image.mime_type,
            "bucket": image.bucket,
            "path": image.path,
        }
    return images


def is_retry(*, user: AbstractBaseUser, run_input: RunAgentInput) -> bool:
    """Whether the caller's thread has this run already (a retry answers it, whatever the
    limits say now)."""
    return Run.objects.filter(
        thread_id=run_input.thread_id, thread__owner_id=user.pk, run_id=run_input.run_id
    ).exists()


def automation_job_check(*, user: AbstractBaseUser, run_input: RunAgentInput) -> str:
    """The automation job an ``automation`` run names (the user's own, or a shared one); one
    that does not exist is a 422."""
    name = run_input.automation_job
    if automation_job_get(name=name, owner_id=user.pk) is None:
        raise RunInputInvalid(
            "invalid RunAgentInput.context: an automation run names an existing job as "
            '{"description": "automation_job", "value": "<job name>"}'
        )
    return name
