"""The stored messages of a thread."""

from django.db import models

from agent_runs.models.runs import Run
from agent_runs.models.threads import Thread, Visibility


class Message(models.Model):
    """A stored chat message (docs/spec/chat-messages-and-attachments.md, Message Metadata)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages", null=True)
    seq = models.PositiveIntegerField()
    message_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    content_blocks = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    visibility_mask = models.PositiveSmallIntegerField(default=int(Visibility.ALL))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="message_unique_seq_per_thread")
        ]
        indexes = [models.Index(fields=["thread", "created_at"], name="message_thread_created")]
        ordering = ["thread", "seq"]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.role}"
