"""POST /api/v1/agent/attachments (docs/spec/chat-messages-and-attachments.md, Flow step 1)."""

import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.db import IntegrityError
from django.test import TestCase
from rest_framework.test import APIClient

from attachments import services
from attachments.errors import AttachmentTooLarge
from attachments.models import Attachment
from attachments.signing import signed_url_verify
from tests.attachments.conftest import UPLOAD_URL, stored_files, upload
from tests.attachments.images import gif_bytes, jpeg_bytes, png_bytes, webp_bytes

pytestmark = pytest.mark.django_db


def _nothing_stored(root: Path) -> None:
    assert stored_files(root) == []
    assert Attachment.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "mime_type", "extension"),
    [
        (png_bytes(), "image/png", "png"),
        (jpeg_bytes(), "image/jpeg", "jpg"),
        (gif_bytes(), "image/gif", "gif"),
        (webp_bytes(), "image/webp", "webp"),
    ],
)
def test_it_stores_an_image_under_the_users_path_and_answers_a_signed_url(
    alice: APIClient, attachment_root: Path, content: bytes, mime_type: str, extension: str
) -> None:
    response = upload(alice, content, name=f"holiday.{extension}", content_type=mime_type)

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"bucket", "path", "mime_type", "url"}
    alice_id = get_user_model().objects.get(username="alice").pk
    assert body["bucket"] == "agent-inputs"
    assert body["mime_type"] == mime_type
    user_id, name = body["path"].split("/")
    assert user_id == str(alice_id)
    assert name.endswith(f".{extension}") and uuid.UUID(name.split(".")[0])
    signed = signed_url_verify(body["url"])
    assert (signed.bucket, signed.path) == (body["bucket"], body["path"])
    assert (attachment_root / body["bucket"] / body["path"]).read_bytes() == content
    row = Attachment.objects.get()
    assert (row.owner_id, row.bucket, row.path) == (alice_id, body["bucket"], body["path"])
    assert (row.mime_type, row.size) == (mime_type, len(content))


def test_it_judges_the_bytes_not_the_name_or_declared_type(
    alice: APIClient, attachment_root: Path
) -> None:
    response = upload(alice, jpeg_bytes(), name="notes.txt", content_type="text/plain")

    assert response.status_code == 201, response.content
    assert response.json()["mime_type"] == "image/jpeg"
    assert response.json()["path"].endswith(".jpg")
    assert Attachment.objects.get().mime_type == "image/jpeg"


@pytest.mark.parametrize(
    "content",
    [
        b"<html><script>alert(document.cookie)</script></html>",
        b"\x89PNG\r\n\x1a\n<html><script>alert(1)</script></html>",
        b"%PDF-1.7\n" + b"0" * 500,
    ],
)
def test_it_refuses_a_non_image_disguised_as_a_png(
    alice: APIClient, attachment_root: Path, content: bytes
) -> None:
    response = upload(alice, content, name="cat.png", content_type="image/png")

    assert response.status_code == 415
    assert (
        "PNG, JPEG, GIF or WebP" in response.json()["detail"]
        or "does not decode" in (response.json()["detail"])
    )
    _nothing_stored(attachment_root)


@pytest.mark.parametrize("size", [(40, 40), (160, 160)])
def test_it_refuses_an_oversized_file(
    alice: APIClient, attachment_root: Path, settings: Any, size: tuple[int, int]
) -> None:
    # 40x40 noise is a few KB (caught as its chunks are parsed); 160x160 is over the limit plus
    # the multipart allowance (caught by its Content-Length before parsing starts).
    settings.ATTACHMENT_MAX_BYTES = 1000
    content = png_bytes(size=size, noise=True)
    assert len(content) > 1000

    response = upload(alice, content)

    assert response.status_code == 413
    assert response.json() == {"detail": "attachment exceeds size limit of 1000 bytes"}
    _nothing_stored(attachment_root)


def test_it_accepts_a_file_of_exactly_the_limit(
    alice: APIClient, attachment_root: Path, settings: Any
) -> None:
    content = png_bytes()
    settings.ATTACHMENT_MAX_BYTES = len(content)

    assert upload(alice, content).status_code == 201
    assert len(stored_files(attachment_root)) == 1


def test_the_service_enforces_the_limit_too(attachment_root: Path, settings: Any) -> None:
    alice = get_user_model().objects.create_user(username="alice")
    settings.ATTACHMENT_MAX_BYTES = 10
    with pytest.raises(AttachmentTooLarge):
        services.attachment_upload(user=alice, file=ContentFile(png_bytes(), name="a.png"))
    _nothing_stored(attachment_root)


def test_it_needs_a_file_field(alice: APIClient, attachment_root: Path) -> None:
    response = alice.post(UPLOAD_URL, {"image": "not a file"}, format="multipart")

    assert response.status_code == 400
    assert response.json() == {"detail": "send exactly one image in the multipart field 'file'"}
    _nothing_stored(attachment_root)


def test_it_takes_one_file_per_upload(alice: APIClient, attachment_root: Path) -> None:
    files = [ContentFile(png_bytes(), name="a.png"), ContentFile(png_bytes(), name="b.png")]
    response = alice.post(UPLOAD_URL, {"file": files}, format="multipart")

    assert response.status_code == 400
    _nothing_stored(attachment_root)


def test_it_wants_multipart(alice: APIClient, attachment_root: Path) -> None:
    response = alice.post(UPLOAD_URL, {"file": "aGVsbG8="}, format="json")

    assert response.status_code == 415
    _nothing_stored(attachment_root)


def test_it_needs_a_user(attachment_root: Path, db: None) -> None:
    response = upload(APIClient(), png_bytes())

    assert response.status_code == 401
    _nothing_stored(attachment_root)


def test_a_failed_row_removes_the_stored_object(
    attachment_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = get_user_model().objects.create_user(username="alice")
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000001")
    monkeypatch.setattr(services.uuid, "uuid4", lambda: fixed)
    # A row already claims the path (without an object): the insert will fail.
    Attachment.objects.create(
        owner=alice,
        bucket="agent-inputs",
        path=f"{alice.pk}/{fixed.hex}.png",
        mime_type="image/png",
        size=1,
    )

    with pytest.raises(IntegrityError):
        services.attachment_upload(user=alice, file=ContentFile(png_bytes(), name="a.png"))

    assert stored_files(attachment_root) == []
    assert Attachment.objects.count() == 1


def test_deleting_an_attachment_removes_its_object_on_commit(
    alice: APIClient, alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    assert len(stored_files(attachment_root)) == 1
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.attachment_delete(attachment=Attachment.objects.get())

    _nothing_stored(attachment_root)


@pytest.mark.parametrize("size", [(40, 40), (160, 160)])
def test_an_oversized_upload_is_stopped_before_the_service_sees_it(
    alice: APIClient,
    attachment_root: Path,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int],
) -> None:
    settings.ATTACHMENT_MAX_BYTES = 1000

    def must_not_run(**kwargs: Any) -> None:
        raise AssertionError("the upload should have stopped while it was parsed")

    monkeypatch.setattr(services, "attachment_upload", must_not_run)

    response = upload(alice, png_bytes(size=size, noise=True))

    assert response.status_code == 413


def test_the_size_limit_holds_for_a_session_user_too(
    attachment_root: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = get_user_model().objects.create_user(username="carol")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/admin/login/")  # sets the CSRF cookie
    settings.ATTACHMENT_MAX_BYTES = 1000
    monkeypatch.setattr(services, "attachment_upload", lambda **kwargs: None)
    file = ContentFile(png_bytes(size=(40, 40), noise=True), name="a.png")

    response = client.post(
        UPLOAD_URL,
        {"file": file, "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
        format="multipart",
    )

    assert response.status_code == 413
