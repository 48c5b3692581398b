"""Writes of the attachments app (docs/spec/chat-messages-and-attachments.md, User Message
Attachments, Flow step 1)."""

import logging
import uuid
from collections.abc import Sequence
from functools import partial

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.db import transaction

from attachments.errors import AttachmentTooLarge
from attachments.images import image_kind_detect
from attachments.models import Attachment
from attachments.storage import attachment_storage

logger = logging.getLogger(__name__)


def attachment_upload(*, user: AbstractBaseUser, file: File) -> Attachment:
    """Store an uploaded image under ``{user_id}/{uuid}.{ext}`` in ``ATTACHMENT_BUCKET``.

    The file's own bytes decide whether it is an image and which (``images.py``); its name and
    declared content type are ignored. The object is written first, then its row; if the row
    fails, the object is deleted, so a failure leaves neither behind. (Called inside an outer
    transaction that later rolls back, the object would stay: call it outside one.)
    """
    max_bytes = settings.ATTACHMENT_MAX_BYTES
    if file.size is None or file.size > max_bytes:
        raise AttachmentTooLarge(max_bytes)
    kind = image_kind_detect(file)
    bucket = settings.ATTACHMENT_BUCKET
    name = stored_object_save(
        name=f"{bucket}/{user.pk}/{uuid.uuid4().hex}.{kind.extension}", file=file
    )
    try:
        with transaction.atomic():
            return Attachment.objects.create(
                owner_id=user.pk,
                bucket=bucket,
                path=name.removeprefix(f"{bucket}/"),
                mime_type=kind.mime_type,
                size=file.size,
            )
    except BaseException:
        _delete_quietly(name)
        raise


def _delete_quietly(name: str) -> None:
    """Remove a half-stored object; a failure here must not hide the error that caused it."""
    try:
        attachment_storage().delete(name)
    except Exception:
        logger.exception("could not delete attachment object %s after a failed upload", name)


def attachment_delete(*, attachment: Attachment) -> None:
    """Delete the row, then (once that commits) the object: a rollback keeps both."""
    attachments_delete(attachments=[attachment])


def attachments_delete(*, attachments: Sequence[Attachment]) -> None:
    """Delete the rows, then (once that commits) their objects: a rollback keeps both."""
    names = [attachment.storage_name for attachment in attachments]
    with transaction.atomic():
        Attachment.objects.filter(pk__in=[attachment.pk for attachment in attachments]).delete()
        for name in names:
            transaction.on_commit(partial(_delete_quietly, name))


def stored_object_save(*, name: str, file: File) -> str:
    """Write ``file`` to the attachments storage at ``name`` (or a free name beside it) and
    give the name it got; on a failure, nothing is left behind. The caller writes the
    object's row, and removes the object (``stored_objects_delete``) if that fails."""
    try:
        return attachment_storage().save(name, file)
    except BaseException:
        _delete_quietly(name)
        raise


def stored_objects_delete(*, names: Sequence[str]) -> None:
    """Remove objects from the attachments storage: once the transaction commits, when in
    one (a rollback keeps them), else now."""
    for name in names:
        transaction.on_commit(partial(_delete_quietly, name))
