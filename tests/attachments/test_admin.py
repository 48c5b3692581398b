"""Attachments in the admin: read-only, but a delete there removes the stored object with its
row (through ``attachment_delete``)."""

from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from attachments.models import Attachment
from tests.attachments.conftest import stored_files, upload
from tests.attachments.images import png_bytes

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def test_deleting_an_attachment_in_the_admin_removes_its_stored_object(
    admin_client: Any,
    alice_upload: dict[str, Any],
    attachment_root: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    attachment = Attachment.objects.get()
    assert stored_files(attachment_root) == [attachment.storage_name]

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(f"{CHANGELIST}{attachment.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Attachment.objects.exists()
    assert stored_files(attachment_root) == []


def test_deleting_a_selection_in_the_admin_removes_every_stored_object(
    admin_client: Any,
    alice_upload: dict[str, Any],
    bob: APIClient,
    attachment_root: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    assert upload(bob, png_bytes()).status_code == 201
    assert len(stored_files(attachment_root)) == 2

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            CHANGELIST,
            {
                "action": "delete_selected",
                "_selected_action": list(Attachment.objects.values_list("pk", flat=True)),
                "post": "yes",
            },
        )

    assert response.status_code == 302
    assert not Attachment.objects.exists()
    assert stored_files(attachment_root) == []


def test_the_objects_stay_until_the_deletion_commits(
    admin_client: Any, alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    attachment = Attachment.objects.get()

    # The test's transaction never commits: the row is gone inside it, the object still stored.
    admin_client.post(f"{CHANGELIST}{attachment.pk}/delete/", {"post": "yes"})

    assert not Attachment.objects.exists()
    assert stored_files(attachment_root) == [attachment.storage_name]


def test_the_admin_neither_adds_nor_changes_attachments(
    admin_client: Any, alice_upload: dict[str, Any]
) -> None:
    attachment = Attachment.objects.get()

    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    response = admin_client.post(f"{CHANGELIST}{attachment.pk}/change/", {"path": "x/y.png"})
    assert response.status_code == 403
    assert Attachment.objects.get().path == attachment.path
