"""What the run API and the history call: a binary block's url → the caller's attachment, a
fresh signed URL for a stored object, and the metadata stored on the user message."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.http import Http404
from django.utils import timezone

from attachments.errors import AttachmentUrlInvalid, ObjectPathInvalid
from attachments.models import Attachment
from attachments.schemas import user_message_attachments_metadata
from attachments.selectors import (
    attachment_from_signed_url,
    attachment_get_for_user,
    attachment_signed_url,
)
from attachments.signing import signed_url_create, signed_url_verify

pytestmark = pytest.mark.django_db


def _user(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def test_a_valid_signed_url_gives_the_owners_attachment(alice_upload: dict[str, Any]) -> None:
    attachment = attachment_from_signed_url(user=_user("alice"), url=alice_upload["url"])

    assert (attachment.bucket, attachment.path) == (alice_upload["bucket"], alice_upload["path"])
    assert attachment.mime_type == "image/png"


def test_another_users_signed_url_is_refused_without_saying_it_exists(
    alice_upload: dict[str, Any], bob: Any
) -> None:
    with pytest.raises(AttachmentUrlInvalid) as refused:
        attachment_from_signed_url(user=_user("bob"), url=alice_upload["url"])

    assert str(refused.value) == "binary content url does not name an attachment of yours"


def test_a_signed_url_of_a_missing_object_reads_the_same(alice_upload: dict[str, Any]) -> None:
    url = signed_url_create(bucket="agent-inputs", path=f"{_user('alice').pk}/gone.png")

    with pytest.raises(AttachmentUrlInvalid) as refused:
        attachment_from_signed_url(user=_user("alice"), url=url)

    assert str(refused.value) == "binary content url does not name an attachment of yours"


def test_an_expired_signed_url_is_refused(alice_upload: dict[str, Any]) -> None:
    url = signed_url_create(
        bucket=alice_upload["bucket"],
        path=alice_upload["path"],
        expires_in=1,
        now=timezone.now() - timedelta(seconds=5),
    )
    with pytest.raises(AttachmentUrlInvalid, match=r"^binary content url has expired$"):
        attachment_from_signed_url(user=_user("alice"), url=url)


def test_a_tampered_signed_url_is_refused(alice_upload: dict[str, Any]) -> None:
    url = alice_upload["url"][:-1] + ("A" if not alice_upload["url"].endswith("A") else "B")
    with pytest.raises(
        AttachmentUrlInvalid, match=r"^binary content url has an invalid signature$"
    ):
        attachment_from_signed_url(user=_user("alice"), url=url)


@pytest.mark.parametrize(
    "url",
    [
        "https://storage.example.com/agent-inputs/user-123/image.png?signature=xxx",
        "https://xxx.supabase.co/storage/v1/object/sign/agent-inputs/../x.png?token=x",
        "data:image/png;base64,iVBORw0KGgo=",
        "",
    ],
)
def test_anything_but_a_signed_url_is_refused(alice_upload: dict[str, Any], url: str) -> None:
    with pytest.raises(AttachmentUrlInvalid) as refused:
        attachment_from_signed_url(user=_user("alice"), url=url)

    assert str(refused.value).startswith("binary content url is not a valid signed URL: ")


def test_a_refused_url_is_a_422_with_its_message() -> None:
    from config.exceptions import api_exception_handler

    response = api_exception_handler(AttachmentUrlInvalid("binary content url has expired"), {})

    assert response is not None
    assert (response.status_code, response.data) == (
        422,
        {"detail": "binary content url has expired"},
    )


def test_the_owner_gets_the_attachment_and_a_stranger_a_404(
    alice_upload: dict[str, Any], bob: Any
) -> None:
    found = attachment_get_for_user(
        user=_user("alice"), bucket=alice_upload["bucket"], path=alice_upload["path"]
    )
    assert found.path == alice_upload["path"]
    with pytest.raises(Http404):
        attachment_get_for_user(
            user=_user("bob"), bucket=alice_upload["bucket"], path=alice_upload["path"]
        )


def test_a_fresh_signed_url_grants_its_object_for_the_configured_time(settings: Any) -> None:
    settings.PUBLIC_BASE_URL = "https://files.example.com"
    asked_at = timezone.now().replace(microsecond=0)

    url = attachment_signed_url(bucket="agent-files", path="agent-inputs/u/t/r/img.jpg")

    assert url.startswith(
        "https://files.example.com/storage/v1/object/sign/agent-files/agent-inputs/u/t/r/img.jpg?"
    )
    granted = signed_url_verify(url)
    assert (granted.bucket, granted.path) == ("agent-files", "agent-inputs/u/t/r/img.jpg")
    ttl = timedelta(seconds=settings.ATTACHMENT_SIGNED_URL_TTL_SECONDS)
    assert granted.expires_at >= asked_at + ttl


def test_no_signed_url_is_made_for_an_unsafe_path() -> None:
    with pytest.raises(ObjectPathInvalid):
        attachment_signed_url(bucket="agent-files", path="../etc/passwd")


def _attachment(path: str, mime_type: str = "image/png") -> Attachment:
    return Attachment(bucket="agent-inputs", path=path, mime_type=mime_type, size=1)


def test_one_image_is_stored_exactly_in_the_spec_shape() -> None:
    assert user_message_attachments_metadata([_attachment("1/a.png")]) == {
        "user_message_attachments": {
            "bucket": "agent-inputs",
            "path": "1/a.png",
            "mime_type": "image/png",
        }
    }


def test_several_images_keep_the_spec_shape_for_the_first_and_list_them_all() -> None:
    metadata = user_message_attachments_metadata(
        [_attachment("1/a.png"), _attachment("1/b.jpg", "image/jpeg")]
    )

    first = {"bucket": "agent-inputs", "path": "1/a.png", "mime_type": "image/png"}
    second = {"bucket": "agent-inputs", "path": "1/b.jpg", "mime_type": "image/jpeg"}
    assert metadata == {
        "user_message_attachments": first,
        "user_message_attachments_all": [first, second],
    }


def test_no_images_add_no_metadata() -> None:
    assert user_message_attachments_metadata([]) == {}
