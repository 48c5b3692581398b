"""Runs with images (docs/spec/run-agent-input.md, BinaryContentBlock; spec/chat-messages-and-
attachments.md, User Message Attachments): upload, run with the signed URL, the stored
metadata, a fresh signed URL, and the image in the model's request at the provider."""

import base64
import http.client
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from agent_runs.models import Message, Run, RunEvent, Thread
from attachments.signing import signed_url_create
from tests.attachments.images import jpeg_bytes, png_bytes
from tests.conftest import post_run, run_input, start_daphne, stop_process, work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(scope="module")
def storage_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("run-images")


@pytest.fixture(scope="module")
def image_server(django_db_setup: Any, django_db_blocker: Any, storage_root: Path) -> Iterator[int]:
    """A daphne whose attachments storage is ``storage_root``, shared with the worker."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTACHMENT_STORAGE_ROOT", str(storage_root))
        process, port = start_daphne(redis_url=settings.REDIS_URL)
    yield port
    stop_process(process)


@pytest.fixture
def shared_storage(settings: Any, storage_root: Path) -> Path:
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": storage_root},
        },
    }
    return storage_root


def call(port: int, method: str, target: str, token: str, body: bytes | None = None, **headers):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            method, target, body=body, headers={"Authorization": f"Bearer {token}", **headers}
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def upload_over_http(port: int, token: str, content: bytes, name: str) -> dict[str, Any]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    status, answer = call(
        port,
        "POST",
        "/api/v1/agent/attachments",
        token,
        body,
        **{"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert status == 201, answer
    uploaded: dict[str, Any] = json.loads(answer)
    return uploaded


def image_run(*urls: str, text: str = "What is in these pictures?") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    blocks += [{"type": "binary", "mimeType": "image/png", "url": url} for url in urls]
    return run_input(messages=[{"id": "m1", "role": "user", "content": blocks}])


def test_images_go_from_upload_to_the_models_request(
    alice_token, redis_queue, image_server, shared_storage, fake_openai
):
    fake_openai.output = {
        "result_type": "execution_report",
        "status": "success",
        "ui_hints": {"title": "Two pictures", "blocks": [{"type": "list", "items": ["a", "b"]}]},
    }
    png, jpeg = png_bytes(), jpeg_bytes()
    first = upload_over_http(image_server, alice_token, png, "a.png")
    second = upload_over_http(image_server, alice_token, jpeg, "b.jpg")
    body = image_run(first["url"], second["url"])
    status, answer = call(
        image_server,
        "POST",
        "/api/v1/agent/runs",
        alice_token,
        json.dumps(body).encode(),
        **{"Content-Type": "application/json"},
    )
    assert status == 202, answer
    work_burst(redis_queue)

    assert Run.objects.get().status == Run.Status.COMPLETED
    message = Message.objects.get(role="user")
    expected = [
        {"bucket": up["bucket"], "path": up["path"], "mime_type": up["mime_type"]}
        for up in (first, second)
    ]
    assert message.metadata["user_message_attachments"] == expected[0]
    assert message.metadata["user_message_attachments_all"] == expected
    # Stored as storage places, not as the (expiring) URLs; the sniffed type wins.
    binary = [block for block in message.content_blocks if block["type"] == "binary"]
    assert [(b["bucket"], b["path"], b["mimeType"]) for b in binary] == [
        (e["bucket"], e["path"], e["mime_type"]) for e in expected
    ]
    assert all("url" not in block for block in binary)

    # The provider received both images inline, byte for byte, after the text.
    user_turn = next(m for m in fake_openai.requests[0]["body"]["messages"] if m["role"] == "user")
    images = [part["image_url"]["url"] for part in user_turn["content"] if "image_url" in part]
    assert images == [
        f"data:image/png;base64,{base64.b64encode(png).decode()}",
        f"data:image/jpeg;base64,{base64.b64encode(jpeg).decode()}",
    ]
    assert user_turn["content"][0]["text"] == "What is in these pictures?"

    # A fresh signed URL for the stored object serves the same bytes.
    query = f"bucket={first['bucket']}&path={first['path']}"
    status, answer = call(
        image_server, "GET", f"/api/v1/agent/attachments/signed-url?{query}", alice_token
    )
    assert status == 200
    fresh = json.loads(answer)["url"]
    target = fresh.split("/storage/", 1)[1]
    status, served = call(image_server, "GET", f"/storage/{target}", "unused")
    assert status == 200 and served == png

    # The history shows both images with fresh URLs, and the answer with the same ui_schema
    # the live TEXT_MESSAGE_END carried.
    status, answer = call(
        image_server, "GET", f"/api/v1/agent/history?threadId={body['threadId']}", alice_token
    )
    assert status == 200, answer
    user, assistant = json.loads(answer)["messages"]
    assert [a["mimeType"] for a in user["attachments"]] == ["image/png", "image/jpeg"]
    for attachment, content in zip(user["attachments"], (png, jpeg), strict=True):
        target = attachment["url"].split("/storage/", 1)[1]
        assert call(image_server, "GET", f"/storage/{target}", "unused") == (200, content)
    live = RunEvent.objects.get(type="TEXT_MESSAGE_END").payload["ui_schema"]
    assert live is not None and live["root"]["type"] == "stack"
    assert assistant["ui_schema"] == live


def tampered(url: str) -> str:
    """The URL with its token's signature changed (one character of its last segment)."""
    head, signature = url.rsplit(".", 1)
    return f"{head}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"


@pytest.mark.parametrize(
    "make_url, message",
    [
        (
            lambda up: tampered(up["url"]),
            "binary content url has an invalid signature",
        ),
        (
            lambda up: signed_url_create(
                bucket=up["bucket"], path=up["path"], now=timezone.now() - timedelta(days=2)
            ),
            "binary content url has expired",
        ),
        (
            lambda up: "https://storage.example.com/agent-inputs/u/image.png?signature=x",
            "binary content url is not a valid signed URL",
        ),
    ],
)
def test_a_run_with_a_bad_image_url_is_refused_and_stores_nothing(
    alice, redis_queue, shared_storage, make_url, message
):
    from tests.attachments.conftest import upload

    uploaded = upload(alice, png_bytes()).json()
    response = post_run(alice, image_run(make_url(uploaded)))

    assert response.status_code == 422
    assert response.json()["detail"].startswith(message)
    assert Thread.objects.count() == Run.objects.count() == Message.objects.count() == 0


def test_a_run_with_a_strangers_image_is_refused_without_saying_it_exists(
    alice, bob, redis_queue, shared_storage
):
    from tests.attachments.conftest import upload

    bobs = upload(bob, png_bytes()).json()
    response = post_run(alice, image_run(bobs["url"]))

    assert response.status_code == 422
    assert response.json()["detail"] == "binary content url does not name an attachment of yours"
    assert Thread.objects.count() == Run.objects.count() == Message.objects.count() == 0


def test_a_retry_with_a_fresh_url_for_the_same_image_is_the_same_run(
    alice, redis_queue, shared_storage
):
    from tests.attachments.conftest import upload

    uploaded = upload(alice, png_bytes()).json()
    body = image_run(uploaded["url"])
    first = post_run(alice, body)
    fresh = signed_url_create(bucket=uploaded["bucket"], path=uploaded["path"], expires_in=60)
    assert fresh != uploaded["url"]
    again = post_run(alice, {**body, "messages": image_run(fresh)["messages"]})

    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert Run.objects.count() == Message.objects.count() == 1
    assert uploaded["url"] not in json.dumps(Run.objects.get().input)


def test_a_run_with_an_image_whose_file_has_gone_is_refused(alice, redis_queue, shared_storage):
    from tests.attachments.conftest import upload

    uploaded = upload(alice, png_bytes()).json()
    (shared_storage / uploaded["bucket"] / uploaded["path"]).unlink()
    response = post_run(alice, image_run(uploaded["url"]))

    assert response.status_code == 422
    assert response.json()["detail"] == "binary content url does not name an attachment of yours"
    assert Run.objects.count() == 0
