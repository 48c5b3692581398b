"""Reads and access checks of attachments. An object that is not the caller's is a 404 (or,
in a run's input, a 422 that does not say whether it exists), never a 403."""

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.db.models import Q
from django.http import Http404

from agent_runs.models import Message, Thread
from attachments.errors import (
    AttachmentUrlInvalid,
    SignedUrlExpired,
    SignedUrlInvalid,
    SignedUrlTampered,
)
from attachments.models import Attachment
from attachments.schemas import user_message_attachment_refs
from attachments.signing import (
    object_ref_validate,
    signed_token_verify,
    signed_url_create,
    signed_url_verify,
)
from attachments.storage import attachment_storage

logger = logging.getLogger(__name__)


def attachment_get_for_user(*, user: AbstractBaseUser, bucket: str, path: str) -> Attachment:
    """The caller's attachment at ``bucket``/``path``. Raises ``ObjectPathInvalid`` for an
    unsafe bucket or path, ``Http404`` for a missing object or a stranger's."""
    object_ref_validate(bucket=bucket, path=path)
    attachment = Attachment.objects.filter(bucket=bucket, path=path, owner_id=user.pk).first()
    if attachment is None:
        raise Http404
    return attachment


def attachment_signed_url(*, bucket: str, path: str) -> str:
    """A fresh signed URL for the stored object at ``bucket``/``path``, valid for
    ``ATTACHMENT_SIGNED_URL_TTL_SECONDS``. A computation with the settings' key: it neither
    reads the database nor checks that the object exists or whose it is (the caller does, if
    it must). Raises ``ObjectPathInvalid`` for an unsafe bucket or path."""
    return signed_url_create(bucket=bucket, path=path)


def attachment_from_signed_url(*, user: AbstractBaseUser, url: str) -> Attachment:
    """The attachment a run's binary content ``url`` names (docs/spec/run-agent-input.md,
    BinaryContentBlock: "must be a valid signed URL"): a genuine, unexpired signed URL of this
    service for an object ``user`` owns. Raises ``AttachmentUrlInvalid`` (422) otherwise."""
    try:
        signed = signed_url_verify(url)
    except SignedUrlExpired:
        raise AttachmentUrlInvalid("binary content url has expired") from None
    except SignedUrlTampered:
        raise AttachmentUrlInvalid("binary content url has an invalid signature") from None
    except SignedUrlInvalid as exc:
        raise AttachmentUrlInvalid(f"binary content url is not a valid signed URL: {exc}") from None
    attachment = Attachment.objects.filter(
        bucket=signed.bucket, path=signed.path, owner_id=user.pk
    ).first()
    if attachment is None or not attachment_storage().exists(attachment.storage_name):
        # A row whose object has gone cannot reach the model either: refuse it now (422)
        # rather than fail the run later.
        raise AttachmentUrlInvalid("binary content url does not name an attachment of yours")
    return attachment


def attachment_read(*, attachment: Attachment) -> bytes:
    """The stored bytes. Raises ``Http404`` when the object has gone from storage."""
    with stored_object_open(name=attachment.storage_name) as stored:
        content: bytes = stored.read()
    return content


@dataclass(frozen=True)
class SignedContent:
    """What ``GET /storage/v1/object/sign/{bucket}/{path}?token=…`` serves."""

    attachment: Attachment
    content: bytes
    expires_at: datetime


def signed_content_get(*, bucket: str, path: str, token: str) -> SignedContent:
    """The bytes a signed URL grants. Raises ``ObjectPathInvalid`` / ``SignedUrlInvalid``
    (400), ``SignedUrlTampered`` / ``SignedUrlExpired`` (403) before any lookup, and
    ``Http404`` for an object that no longer exists."""
    signed = signed_token_verify(bucket=bucket, path=path, token=token)
    attachment = Attachment.objects.filter(bucket=signed.bucket, path=signed.path).first()
    if attachment is None:
        raise Http404
    return SignedContent(
        attachment=attachment,
        content=attachment_read(attachment=attachment),
        expires_at=signed.expires_at,
    )


def attachments_of_thread_only(*, thread: Thread) -> list[Attachment]:
    """The owner's attachments that the thread's user messages name and no message of the
    owner's other threads does: what deleting the thread leaves unused. It reads the owner's
    user messages that have images (deleting a thread is rare; nothing indexes images)."""
    with_images = Message.objects.filter(
        thread__owner_id=thread.owner_id,
        role=Message.Role.USER,
        metadata__has_key="user_message_attachments",
    ).values_list("thread_id", "metadata")
    here: set[tuple[str, str]] = set()
    elsewhere: set[tuple[str, str]] = set()
    for thread_id, metadata in with_images:
        (here if thread_id == thread.pk else elsewhere).update(
            user_message_attachment_refs(metadata)
        )
    only_here = here - elsewhere
    if not only_here:
        return []
    named = reduce(or_, (Q(bucket=bucket, path=path) for bucket, path in only_here))
    return list(Attachment.objects.filter(named, owner_id=thread.owner_id))


def stored_object_open(*, name: str) -> File:
    """An object of the attachments storage, open for reading (the caller closes it).
    Raises ``Http404`` when it has gone from storage."""
    try:
        return attachment_storage().open(name, "rb")
    except FileNotFoundError:
        logger.warning("stored object %s has a row but no object in storage", name)
        raise Http404 from None
