"""GET /api/v1/agent/attachments/signed-url (docs/spec/chat-messages-and-attachments.md, Flow
step 6) and GET /storage/v1/object/sign/{bucket}/{path}?token=… (the signed URL itself)."""

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from attachments.models import Attachment
from attachments.signing import signed_url_create, signed_url_verify
from tests.attachments.conftest import SIGNED_URL_URL, stored_files, upload
from tests.attachments.images import png_bytes

pytestmark = pytest.mark.django_db


def _get(url: str) -> Any:
    """Fetch a signed URL as a browser would: no credentials but the token."""
    parts = urlsplit(url)
    return Client().get(f"{parts.path}?{parts.query}")


def _unchanged(root: Path, upload: dict[str, Any]) -> None:
    """Nothing was added or removed: alice's one object and its one row."""
    assert stored_files(root) == [f"{upload['bucket']}/{upload['path']}"]
    assert Attachment.objects.count() == 1


def test_it_gives_the_owner_a_fresh_signed_url(
    alice: APIClient, alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    query = {"bucket": alice_upload["bucket"], "path": alice_upload["path"]}
    response = alice.get(SIGNED_URL_URL, query)

    assert response.status_code == 200
    body = response.json()
    assert {key: body[key] for key in ("bucket", "path")} == query
    assert set(body) == {"bucket", "path", "url"}
    signed = signed_url_verify(body["url"])
    assert (signed.bucket, signed.path) == (query["bucket"], query["path"])
    assert _get(body["url"]).content == png_bytes()


def test_it_does_not_tell_a_stranger_the_object_exists(
    bob: APIClient, alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    response = bob.get(
        SIGNED_URL_URL, {"bucket": alice_upload["bucket"], "path": alice_upload["path"]}
    )

    assert response.status_code == 404
    _unchanged(attachment_root, alice_upload)


def test_it_answers_404_for_a_missing_object(alice: APIClient, attachment_root: Path) -> None:
    response = alice.get(SIGNED_URL_URL, {"bucket": "agent-inputs", "path": "1/nothing.png"})

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({}, "bucket and path are required"),
        ({"bucket": "agent-inputs"}, "bucket and path are required"),
        ({"bucket": "agent-inputs", "path": "../../etc/passwd"}, "'..'"),
        ({"bucket": "agent-inputs", "path": "/etc/passwd"}, "relative"),
        ({"bucket": "agent-inputs", "path": "1\\..\\x.png"}, "backslash"),
        ({"bucket": "agent-inputs", "path": "1/%2e%2e/x.png"}, "percent"),
        ({"bucket": "agent-inputs", "path": "1/x\x00.png"}, "control"),
        ({"bucket": "..", "path": "1/x.png"}, "invalid bucket"),
    ],
)
def test_it_rejects_a_malformed_bucket_or_path(
    alice: APIClient, alice_upload: dict[str, Any], attachment_root: Path, query: Any, message: str
) -> None:
    response = alice.get(SIGNED_URL_URL, query)

    assert response.status_code == 400
    assert message in response.json()["detail"]
    _unchanged(attachment_root, alice_upload)


def test_it_needs_a_user(alice_upload: dict[str, Any]) -> None:
    response = APIClient().get(
        SIGNED_URL_URL, {"bucket": alice_upload["bucket"], "path": alice_upload["path"]}
    )

    assert response.status_code == 401


def test_a_signed_url_serves_the_bytes_with_the_stored_type(
    alice_upload: dict[str, Any],
) -> None:
    response = _get(alice_upload["url"])

    assert response.status_code == 200
    assert response.content == png_bytes()
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert response["Cache-Control"].startswith("private, max-age=")


def test_a_signed_url_needs_no_other_credentials_and_ignores_a_bad_one(
    alice_upload: dict[str, Any],
) -> None:
    parts = urlsplit(alice_upload["url"])
    response = Client().get(
        f"{parts.path}?{parts.query}", headers={"Authorization": "Bearer not-a-token"}
    )

    assert response.status_code == 200


def test_an_expired_signed_url_is_refused(
    alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    url = signed_url_create(
        bucket=alice_upload["bucket"],
        path=alice_upload["path"],
        expires_in=60,
        now=timezone.now() - timedelta(minutes=2),
    )
    response = _get(url)

    assert response.status_code == 403
    assert response.json() == {"detail": "signed URL has expired"}
    _unchanged(attachment_root, alice_upload)


def test_a_tampered_token_is_refused(alice_upload: dict[str, Any], attachment_root: Path) -> None:
    url = alice_upload["url"]
    tampered = url[:-2] + ("AA" if not url.endswith("AA") else "BB")
    response = _get(tampered)

    assert response.status_code == 403
    assert response.json() == {"detail": "signed URL token signature is invalid"}
    _unchanged(attachment_root, alice_upload)


def test_a_token_does_not_open_another_object(
    alice: APIClient, bob: APIClient, alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    bobs = upload(bob, png_bytes()).json()
    alices_token = urlsplit(alice_upload["url"]).query
    # alice's token on the path of bob's object.
    bobs_path = urlsplit(bobs["url"]).path

    response = Client().get(f"{bobs_path}?{alices_token}")

    assert response.status_code == 403
    assert response.json() == {"detail": "signed URL token was issued for another object"}
    assert Attachment.objects.count() == 2


@pytest.mark.parametrize(
    "path",
    [
        "/storage/v1/object/sign/agent-inputs/../../etc/passwd",
        "/storage/v1/object/sign/agent-inputs/1/%2e%2e/%2e%2e/settings.py",
        "/storage/v1/object/sign/agent-inputs/1/%252e%252e/x.png",
        "/storage/v1/object/sign/agent-inputs//etc/passwd",
        "/storage/v1/object/sign/agent-inputs/1%5C..%5Cx.png",
        "/storage/v1/object/sign/agent-inputs/1/x%00.png",
        "/storage/v1/object/sign/%2e%2e/1/x.png",
    ],
)
def test_a_traversal_path_is_refused_before_any_lookup(
    alice_upload: dict[str, Any], attachment_root: Path, path: str
) -> None:
    token = urlsplit(alice_upload["url"]).query
    response = Client().get(f"{path}?{token}")

    assert response.status_code == 400
    assert "invalid" in response.json()["detail"]
    _unchanged(attachment_root, alice_upload)


def test_a_signed_url_without_a_token_is_refused(alice_upload: dict[str, Any]) -> None:
    response = Client().get(urlsplit(alice_upload["url"]).path)

    assert response.status_code == 400
    assert response.json() == {"detail": "signed URL token is missing or malformed"}


def test_a_signed_url_of_a_deleted_object_is_a_404(alice_upload: dict[str, Any]) -> None:
    Attachment.objects.all().delete()

    assert _get(alice_upload["url"]).status_code == 404


def test_a_signed_url_whose_object_left_storage_is_a_404(
    alice_upload: dict[str, Any], attachment_root: Path
) -> None:
    (attachment_root / alice_upload["bucket"] / alice_upload["path"]).unlink()

    assert _get(alice_upload["url"]).status_code == 404


def test_a_signed_url_serves_whatever_the_client_accepts(
    alice_upload: dict[str, Any],
) -> None:
    parts = urlsplit(alice_upload["url"])
    served = Client().get(f"{parts.path}?{parts.query}", headers={"Accept": "image/png"})
    refused = Client().get(f"{parts.path}?{parts.query}x", headers={"Accept": "image/png"})

    assert served.status_code == 200 and served.content == png_bytes()
    assert refused.status_code == 403
    assert refused.json() == {"detail": "signed URL token signature is invalid"}
