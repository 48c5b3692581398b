"""Attachments' side of the run core's ``attachments`` port (``agent_runs/ports.py``), filled
in ``AttachmentsConfig.ready()``."""

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File

from agent_runs.models import Thread
from agent_runs.ports import StoredImage
from attachments import selectors, services
from attachments.models import Attachment
from attachments.schemas import user_message_attachments_metadata


class AttachmentsPort:
    """The run core's ``Attachments``: attachments' services and selectors, as they are."""

    def image_from_signed_url(self, *, user: AbstractBaseUser, url: str) -> Attachment:
        return selectors.attachment_from_signed_url(user=user, url=url)

    def image_read(self, *, user: Any, bucket: str, path: str) -> bytes:
        attachment = selectors.attachment_get_for_user(user=user, bucket=bucket, path=path)
        return selectors.attachment_read(attachment=attachment)

    def images_metadata(self, images: Sequence[StoredImage]) -> dict[str, Any]:
        return dict(user_message_attachments_metadata(images))

    def thread_images_delete(self, *, thread: Thread) -> None:
        services.attachments_delete(attachments=selectors.attachments_of_thread_only(thread=thread))

    def object_save(self, *, name: str, file: File) -> str:
        return services.stored_object_save(name=name, file=file)

    def objects_delete(self, *, names: Sequence[str]) -> None:
        services.stored_objects_delete(names=names)

    def object_open(self, *, name: str) -> File:
        return selectors.stored_object_open(name=name)
