from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agent_runs.models import Message, Thread, UserProfile, Visibility


@pytest.fixture
def alice_user(alice: Any) -> Any:
    return get_user_model().objects.get(username="alice")


@pytest.fixture
def bob_user(bob: Any) -> Any:
    return get_user_model().objects.get(username="bob")


def profile_set(user: Any, **settings: Any) -> None:
    UserProfile.objects.update_or_create(user=user, defaults={"settings": settings})


def add_message(
    thread: Thread,
    at: str,
    *,
    role: str = "user",
    content: str = "",
    mask: int = int(Visibility.ALL),
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A message of ``thread`` with the next seq, stored at ``at`` (ISO-8601 with an offset)."""
    thread.last_seq += 1
    thread.save(update_fields=["last_seq"])
    message = Message.objects.create(
        thread=thread,
        seq=thread.last_seq,
        message_id=f"msg-{thread.last_seq}",
        role=role,
        content=content or f"{role} message {thread.last_seq}",
        metadata=metadata or {},
        visibility_mask=mask,
    )
    # created_at is auto_now_add: the stored instant is set afterwards.
    Message.objects.filter(pk=message.pk).update(created_at=datetime.fromisoformat(at))
    message.refresh_from_db()
    return message
