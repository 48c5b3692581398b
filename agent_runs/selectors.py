"""Reads and access checks. A thread that is not the caller's is a 404, never a 403."""

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404

from agent_runs.models import Run, Thread


def thread_get_for_user(*, user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread:
    thread = Thread.objects.filter(pk=thread_id, owner_id=user.pk).first()
    if thread is None:
        raise Http404
    return thread


def run_next_queued(*, thread_id: uuid.UUID) -> Run | None:
    """The thread's oldest queued run: the next one to start once none is running."""
    return Run.objects.filter(thread_id=thread_id, status=Run.Status.QUEUED).order_by("pk").first()
