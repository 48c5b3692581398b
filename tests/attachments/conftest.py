from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.attachments.images import png_bytes

UPLOAD_URL = "/api/v1/agent/attachments"
SIGNED_URL_URL = "/api/v1/agent/attachments/signed-url"


def stored_files(root: Path) -> list[str]:
    """Every file under the storage root, as relative paths."""
    if not root.exists():
        return []
    return sorted(str(item.relative_to(root)) for item in root.rglob("*") if item.is_file())


def upload(
    client: APIClient,
    content: bytes,
    *,
    name: str = "photo.png",
    content_type: str = "image/png",
) -> Any:
    file = SimpleUploadedFile(name, content, content_type=content_type)
    return client.post(UPLOAD_URL, {"file": file}, format="multipart")


@pytest.fixture
def alice_upload(alice: APIClient, attachment_root: Path) -> dict[str, Any]:
    """alice's uploaded PNG: the API's answer."""
    response = upload(alice, png_bytes())
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body
