"""Threads (conversations), the stages of a run and who sees a message."""

import enum
import uuid

from django.conf import settings
from django.db import models


class Stage(models.TextChoices):
    """The stages of a run's pipeline, in the order they run (router → worker → memory)."""

    ROUTER = "router"
    WORKER = "worker"
    MEMORY = "memory"


class Visibility(enum.IntFlag):
    """Consumers of a stored message (docs/spec/sse-events-and-usage.md, section 8).

    ``REASONING`` marks a model's reasoning (its ``reasoning_content``): the history shows it
    only when asked (``?include=reasoning``), and no stage's context holds it, since a
    provider refuses its reasoning sent back to it (DeepSeek answers 400). It is no part of
    ``ALL``."""

    UI_HISTORY = 1
    ROUTER = 2
    WORKER = 4
    MEMORY = 8
    REASONING = 16
    CONTEXT = ROUTER | WORKER | MEMORY
    ALL = UI_HISTORY | CONTEXT


class Thread(models.Model):
    """A conversation; its UUID is the AG-UI ``threadId``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_threads"
    )
    # Last message seq handed out; bumped under the thread's row lock.
    last_seq = models.PositiveIntegerField(default=0, editable=False)
    # What a client attached to the thread when it created it (an Agent Protocol task's
    # ``additional_input``, its spec ``workspace``), given back as it came.
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent")]

    def __str__(self) -> str:
        return str(self.id)


class MultitaskStrategy(models.TextChoices):
    """What a new run does when its thread is busy (a run queued, running or parked, or an
    interrupt open): ``reject`` it (409, nothing written), ``enqueue`` it after the thread's
    runs, ``interrupt`` the run holding the thread's turn (cancelled; the new run goes next,
    before the runs queued behind it), or ``rollback`` (as interrupt, and the cancelled run's
    messages leave the conversation). docs/protocols/multitask.md."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"
