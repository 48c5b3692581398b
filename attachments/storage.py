"""The storage attachments live in: Django's ``STORAGES["attachments"]`` (config/settings.py)."""

from django.core.files.storage import Storage, storages

STORAGE_ALIAS = "attachments"


def attachment_storage() -> Storage:
    return storages[STORAGE_ALIAS]
