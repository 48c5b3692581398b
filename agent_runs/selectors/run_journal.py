"""Reads of one run's journal and of a thread's latest run, for edges that rebuild a run's
answer from what is stored (the OpenAI Responses API's ``GET /responses/{id}``)."""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from agent_runs.models import Run, RunEvent


def run_event_payloads(*, run: Run) -> list[dict[str, Any]]:
    """The run's stored events (their wire JSON), in order (the ``(run, seq)`` index)."""
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("payload", flat=True))


def thread_latest_run_of_user(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Run | None:
    """The latest run of the thread, if the thread is the caller's (``None`` otherwise, or
    when it has none)."""
    runs = Run.objects.filter(thread_id=thread_id, thread__owner_id=user.pk)
    return runs.order_by("-created_at", "-pk").first()
