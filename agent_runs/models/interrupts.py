"""Interrupts: tool calls a run stopped on, waiting for an answer from outside."""

from django.db import models

from agent_runs.models.runs import Run
from agent_runs.models.threads import Thread


class Interrupt(models.Model):
    """A tool call a run stopped on, waiting for an answer from outside (AG-UI 1.0's
    ``Interrupt``): an approval of a backend tool that requires one, or the result of a
    client's own (frontend) tool. The run ends with its reply held (``Run.suspended_reply``);
    the run that answers every open interrupt of the thread goes on from it. While one is
    pending its thread takes no new user message."""

    class Kind(models.TextChoices):
        APPROVAL = "approval"  # a backend tool that runs once a person approves it
        CLIENT_TOOL = "client_tool"  # a tool of the client's, which the client runs

    class Status(models.TextChoices):
        PENDING = "pending"
        RESOLVED = "resolved"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    id = models.CharField(primary_key=True, max_length=40)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="interrupts")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interrupts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # AG-UI's open ``reason``: ``tool_approval`` for an approval, ``tool_call`` otherwise.
    reason = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=255)
    tool_name = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    # The JSON schema an answer's payload must meet (an approval's ``approved``…).
    response_schema = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    expires_at = models.DateTimeField()
    # The answer (an approval's payload, a client tool's result), and the run that gave it.
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="answered"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # "Does this thread wait on an interrupt?", asked before every new run.
            models.Index(
                fields=["thread"],
                condition=models.Q(status="pending"),
                name="interrupt_thread_pending",
            ),
            models.Index(
                fields=["expires_at"],
                condition=models.Q(status="pending"),
                name="interrupt_pending_expiry",
            ),
        ]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.id} {self.tool_name} {self.status}"
