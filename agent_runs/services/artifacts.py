"""Writes of artifacts: the files of a thread's work, kept in the attachments storage (a
filesystem folder or S3), each object written before its row and removed with it."""

import mimetypes
import posixpath
import uuid
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import transaction

from agent_runs import ports
from agent_runs.errors import ArtifactPathInvalid, ArtifactTooLarge
from agent_runs.models import Artifact, Run, Step, Thread

# The agent's final answer, kept as a file where the run asks for it (Run.answer_artifact).
ANSWER_FILE_NAME = "answer.md"
_FOLDER = "artifacts"
_MAX_PATH_CHARS = 1024
_MAX_NAME_CHARS = 255


def artifact_upload(
    *, thread: Thread, step: Step | None, file: File, relative_path: str = ""
) -> Artifact:
    """Keep a file a client uploads to a thread (of one of its steps, or none). The
    ``relative_path`` must stay inside the task's workspace (``ArtifactPathInvalid``, 400);
    a file over ``ARTIFACT_MAX_BYTES`` is ``ArtifactTooLarge`` (413). Its type comes from
    its name, else what the client declared."""
    max_bytes = settings.ARTIFACT_MAX_BYTES
    if file.size is None or file.size > max_bytes:
        raise ArtifactTooLarge(max_bytes)
    file_name = _file_name(file.name or "")
    path = relative_path_clean(relative_path)
    declared = getattr(file, "content_type", None)
    return _artifact_store(
        thread_id=thread.pk,
        owner_id=thread.owner_id,
        step_id=None if step is None else step.pk,
        file=file,
        fields={
            "agent_created": False,
            "file_name": file_name,
            "relative_path": path,
            "mime_type": _mime_type(path or file_name, declared),
            "size_bytes": file.size,
        },
    )


def agent_artifact_create(
    *, run: Run, step_id: uuid.UUID, file_name: str, content: bytes, mime_type: str
) -> Artifact:
    """Keep a file the agent made in one of a run's stages."""
    return _artifact_store(
        thread_id=run.thread_id,
        owner_id=run.thread.owner_id,
        step_id=step_id,
        file=ContentFile(content, name=file_name),
        fields={
            "agent_created": True,
            "file_name": file_name,
            "relative_path": file_name,
            "mime_type": mime_type,
            "size_bytes": len(content),
        },
    )


def _artifact_store(
    *,
    thread_id: uuid.UUID,
    owner_id: Any,
    step_id: uuid.UUID | None,
    file: File,
    fields: dict[str, Any],
) -> Artifact:
    """The object first, then its row; when the row cannot be written, the object goes."""
    artifact_id = uuid.uuid4()
    storage = ports.attachments()
    name = storage.object_save(
        name=f"{_FOLDER}/{owner_id}/{thread_id}/{artifact_id.hex}", file=file
    )
    try:
        with transaction.atomic():
            return Artifact.objects.create(
                id=artifact_id, thread_id=thread_id, step_id=step_id, storage_name=name, **fields
            )
    except BaseException:
        storage.objects_delete(names=[name])
        raise


def artifact_delete(*, artifact: Artifact) -> None:
    """Delete the row, then (once that commits) its object."""
    with transaction.atomic():
        Artifact.objects.filter(pk=artifact.pk).delete()
        ports.attachments().objects_delete(names=[artifact.storage_name])


def relative_path_clean(value: str) -> str:
    """A client's ``relative_path``, normalised: relative, inside the workspace (no ``..``
    out of it), no NUL or backslash, at most 1,024 characters. ``ArtifactPathInvalid``
    otherwise."""
    if not value:
        return ""
    if (
        len(value) > _MAX_PATH_CHARS
        or "\x00" in value
        or "\\" in value
        or value.startswith("/")
        or any(part == ".." for part in value.split("/"))
    ):
        raise ArtifactPathInvalid()
    cleaned = posixpath.normpath(value)
    if cleaned in (".", "") or cleaned.startswith("../"):
        raise ArtifactPathInvalid()
    return cleaned


def _file_name(name: str) -> str:
    """The upload's own file name, without any folder a client put in it."""
    base = posixpath.basename(name.replace("\\", "/")).replace("\x00", "")
    return base[-_MAX_NAME_CHARS:] or "file"


def _mime_type(name: str, declared: str | None) -> str:
    guessed, _encoding = mimetypes.guess_type(name)
    if guessed:
        return guessed
    if declared and "/" in declared and len(declared) <= _MAX_NAME_CHARS:
        return declared
    return "application/octet-stream"
