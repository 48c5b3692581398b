"""The attachment flow through real HTTP against daphne: upload, fetch the signed URL's bytes,
a fresh signed URL; and the security cases as a client on the wire sees them."""

import http.client
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.conf import settings

from attachments.models import Attachment
from tests.attachments.conftest import SIGNED_URL_URL, UPLOAD_URL, stored_files
from tests.attachments.images import jpeg_bytes, png_bytes
from tests.conftest import start_daphne, stop_process

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC_BASE_URL = "https://attachments.example.test"
MAX_BYTES = 20_000


@dataclass
class Server:
    port: int
    root: Path


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture(scope="module")
def server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A daphne of its own, so its storage root is one this module can inspect."""
    root = tmp_path_factory.mktemp("daphne-attachments")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTACHMENT_STORAGE_ROOT", str(root))
        patch.setenv("PUBLIC_BASE_URL", PUBLIC_BASE_URL)
        patch.setenv("ATTACHMENT_MAX_BYTES", str(MAX_BYTES))
        process, port = start_daphne(redis_url=settings.REDIS_URL)
    yield Server(port=port, root=root)
    stop_process(process)


@pytest.fixture(autouse=True)
def _empty_storage(server: Server) -> Iterator[None]:
    yield
    for item in sorted(server.root.rglob("*"), reverse=True):
        item.unlink() if item.is_file() else item.rmdir()


def request(
    server: Server,
    method: str,
    target: str,
    *,
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    all_headers = dict(headers or {})
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, target, body=body, headers=all_headers)
        response = connection.getresponse()
        return Answer(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()


def upload(server: Server, token: str, content: bytes, *, name: str = "a.png") -> Answer:
    boundary = uuid.uuid4().hex
    body = (
        (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    content_type = f"multipart/form-data; boundary={boundary}"
    return request(
        server, "POST", UPLOAD_URL, token=token, body=body, headers={"Content-Type": content_type}
    )


def local_target(url: str) -> str:
    """The signed URL's path and query, to send to this daphne (its host is PUBLIC_BASE_URL)."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_an_image_goes_up_comes_back_signed_and_gets_a_fresh_url(
    server: Server, alice_token: str
) -> None:
    uploaded = upload(server, alice_token, jpeg_bytes(), name="holiday.png")

    assert uploaded.status == 201, uploaded.body
    body = uploaded.json()
    assert body["mime_type"] == "image/jpeg"
    assert body["url"].startswith(
        f"{PUBLIC_BASE_URL}/storage/v1/object/sign/{body['bucket']}/{body['path']}?token="
    )
    assert stored_files(server.root) == [f"{body['bucket']}/{body['path']}"]
    assert Attachment.objects.get().path == body["path"]

    fetched = request(server, "GET", local_target(body["url"]))
    assert fetched.status == 200
    assert fetched.body == jpeg_bytes()
    assert fetched.headers["Content-Type"] == "image/jpeg"
    assert fetched.headers["X-Content-Type-Options"] == "nosniff"

    query = urlencode({"bucket": body["bucket"], "path": body["path"]})
    fresh = request(server, "GET", f"{SIGNED_URL_URL}?{query}", token=alice_token)
    assert fresh.status == 200
    assert {key: fresh.json()[key] for key in ("bucket", "path")} == {
        "bucket": body["bucket"],
        "path": body["path"],
    }
    assert request(server, "GET", local_target(fresh.json()["url"])).body == jpeg_bytes()


def test_on_the_wire_every_misuse_is_a_clear_4xx_and_leaves_nothing_behind(
    server: Server, alice_token: str, bob_token: str
) -> None:
    body = upload(server, alice_token, png_bytes()).json()
    kept = [f"{body['bucket']}/{body['path']}"]
    token_query = urlsplit(body["url"]).query
    query = urlencode({"bucket": body["bucket"], "path": body["path"]})

    strangers = request(server, "GET", f"{SIGNED_URL_URL}?{query}", token=bob_token)
    tampered = request(server, "GET", local_target(body["url"])[:-2] + "xx")
    traversal = request(
        server,
        "GET",
        f"/storage/v1/object/sign/agent-inputs/%2e%2e/%2e%2e/etc/passwd?{token_query}",
    )
    raw_traversal = request(
        server, "GET", f"/storage/v1/object/sign/agent-inputs/../../etc/passwd?{token_query}"
    )
    disguised = upload(server, alice_token, b"<script>alert(1)</script>", name="cat.png")
    oversized = upload(server, alice_token, png_bytes(size=(100, 100), noise=True))
    missing = request(
        server,
        "POST",
        UPLOAD_URL,
        token=alice_token,
        body=b'--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--b--\r\n',
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )

    assert strangers.status == 404
    assert (tampered.status, tampered.json()) == (
        403,
        {"detail": "signed URL token signature is invalid"},
    )
    assert traversal.status == 400 and "invalid path" in traversal.json()["detail"]
    assert raw_traversal.status == 400 and "'..'" in raw_traversal.json()["detail"]
    assert disguised.status == 415 and "PNG, JPEG, GIF or WebP" in disguised.json()["detail"]
    assert (oversized.status, oversized.json()) == (
        413,
        {"detail": f"attachment exceeds size limit of {MAX_BYTES} bytes"},
    )
    assert missing.status == 400 and "'file'" in missing.json()["detail"]
    assert stored_files(server.root) == kept
    assert Attachment.objects.count() == 1
