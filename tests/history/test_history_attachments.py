"""History user messages: stored attachments come back with freshly signed URLs, and the stored
``metadata.user_message_attachments`` passes through
(docs/spec/chat-messages-and-attachments.md)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agent_runs.models import Thread
from attachments.signing import signed_url_verify
from tests.history.conftest import add_message

pytestmark = pytest.mark.django_db

JPEG = {"bucket": "agent-files", "path": "agent-inputs/u/t/r/img.jpg", "mime_type": "image/jpeg"}
PNG = {"bucket": "agent-files", "path": "agent-inputs/u/t/r/chart.png", "mime_type": "image/png"}


def only_message(client):
    response = client.get("/api/v1/agent/history")
    assert response.status_code == 200
    (message,) = response.json()["messages"]
    return message


def test_a_year_old_message_gets_urls_signed_at_the_time_of_the_request(
    alice, alice_user, settings
):
    settings.PUBLIC_BASE_URL = "https://files.example.com"
    thread = Thread.objects.create(owner=alice_user)
    stored = [JPEG, PNG]
    add_message(thread, "2025-03-13T10:00:00+00:00", metadata={"user_message_attachments": stored})
    asked_at = timezone.now().replace(microsecond=0)

    message = only_message(alice)

    assert [attachment["mimeType"] for attachment in message["attachments"]] == [
        "image/jpeg",
        "image/png",
    ]
    for attachment, entry in zip(message["attachments"], stored, strict=True):
        assert attachment["url"].startswith(
            f"https://files.example.com/storage/v1/object/sign/{entry['bucket']}/"
        )
        granted = signed_url_verify(attachment["url"])  # genuine and not expired
        assert (granted.bucket, granted.path) == (entry["bucket"], entry["path"])
        ttl = timedelta(seconds=settings.ATTACHMENT_SIGNED_URL_TTL_SECONDS)
        assert granted.expires_at >= asked_at + ttl
    assert message["metadata"] == {"user_message_attachments": stored}


def test_an_attachment_stored_as_one_object_is_shown_too(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-13T10:00:00+00:00", metadata={"user_message_attachments": JPEG})

    message = only_message(alice)

    assert [attachment["mimeType"] for attachment in message["attachments"]] == ["image/jpeg"]
    assert signed_url_verify(message["attachments"][0]["url"]).path == JPEG["path"]
    assert message["metadata"] == {"user_message_attachments": JPEG}


def test_stored_entries_that_name_no_safe_object_are_left_out(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    stored = [
        {"bucket": "agent-files", "path": "../../etc/passwd", "mime_type": "image/png"},
        {"bucket": "agent-files", "mime_type": "image/png"},
        "agent-files/img.png",
        {"bucket": "agent-files", "path": "agent-inputs/no-type.png"},
    ]
    add_message(thread, "2026-03-13T10:00:00+00:00", metadata={"user_message_attachments": stored})

    message = only_message(alice)

    assert [signed_url_verify(a["url"]).path for a in message["attachments"]] == [
        "agent-inputs/no-type.png"
    ]
    assert message["attachments"][0]["mimeType"] == "application/octet-stream"


def test_an_assistant_message_has_no_attachments_field(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(
        thread,
        "2026-03-13T10:00:00+00:00",
        role="assistant",
        metadata={"user_message_attachments": [JPEG]},  # misplaced: not an assistant's
    )

    message = only_message(alice)

    assert "attachments" not in message and "metadata" not in message
