"""What the memory stage keeps about a user (``UserMemory``)."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_runs.models import UserMemory


def user_memory_add(*, user_id: int, content: str, kind: str, run_pk: int | None) -> UserMemory:
    """Keep one fact or preference about the user (the memory stage's write). The same text
    is kept once, and only the newest ``AGENT_MEMORY_MAX_ITEMS`` are kept."""
    content = " ".join(content.split())[:500]
    if not content:
        raise ValueError("content is empty")
    if kind not in UserMemory.Kind.values:
        raise ValueError(f"kind must be one of {UserMemory.Kind.values}")
    with transaction.atomic():
        # Remembered again: it is news again, so it is the last to go.
        memory, _ = UserMemory.objects.update_or_create(
            owner_id=user_id,
            content=content,
            defaults={"kind": kind, "source_run_id": run_pk, "created_at": timezone.now()},
        )
        stale = UserMemory.objects.filter(owner_id=user_id).order_by("-created_at", "-pk")[
            settings.AGENT_MEMORY_MAX_ITEMS :
        ]
        UserMemory.objects.filter(pk__in=list(stale.values_list("pk", flat=True))).delete()
    return memory


def user_memory_forget(*, user_id: int, memory_id: int) -> bool:
    """Forget one of the user's memories; False when the user has no such memory."""
    deleted, _ = UserMemory.objects.filter(pk=memory_id, owner_id=user_id).delete()
    return deleted > 0
