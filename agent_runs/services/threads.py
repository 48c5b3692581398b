"""Writes of threads: deleting one with everything it holds."""

import logging
import uuid
from typing import Any

from django.db import transaction
from redis.exceptions import RedisError

from agent_runs import ports
from agent_runs.events.emitter import redis_client, stream_key
from agent_runs.models import RUN_ACTIVE_STATUSES, Artifact, CalendarEvent, Run, Thread
from agent_runs.services.lifecycle import run_cancel

logger = logging.getLogger(__name__)


def thread_delete(*, thread: Thread) -> None:
    """Delete a thread and what it holds: its messages, its runs and their events, the
    calendar events its runs created, its steps and artifacts, the attachments only its
    messages name (the rows with the thread, the stored objects once that commits) and its
    Redis event stream.

    A queued or running run is cancelled first (``run_cancel``: a running run's job is
    stopped). Usage records stay, without their run: what was billed never changes, and their
    ``thread_ref`` / ``run_ref`` still name the run. The user's memories stay too (they are
    the user's, not the thread's). A run accepted while this ran is cancelled as well before
    the thread goes.
    """
    while True:
        for run in Run.objects.filter(thread=thread, status__in=RUN_ACTIVE_STATUSES).order_by(
            "-pk"
        ):
            # The newest first, so no cancel passes the thread's turn to a run still queued.
            run_cancel(run=run)
        with transaction.atomic():
            # Under the thread's row lock no run can be accepted (run_create takes it too).
            locked = Thread.objects.select_for_update().filter(pk=thread.pk).first()
            if locked is None:
                return  # deleted meanwhile
            if Run.objects.filter(thread=locked, status__in=RUN_ACTIVE_STATUSES).exists():
                continue  # accepted before the lock: cancel it too
            _thread_with_contents_delete(locked)
            return


def _thread_with_contents_delete(locked: Thread) -> None:
    """The thread's row and every row it holds, the stored objects only it names (once this
    commits), and its Redis event stream (once this commits)."""
    attachments = ports.attachments()
    attachments.thread_images_delete(thread=locked)
    attachments.objects_delete(
        names=list(Artifact.objects.filter(thread=locked).values_list("storage_name", flat=True))
    )
    CalendarEvent.objects.filter(run__thread=locked).delete()
    thread_id = locked.pk
    locked.delete()
    transaction.on_commit(lambda: _event_stream_delete(thread_id))


def _event_stream_delete(thread_id: uuid.UUID) -> None:
    try:
        redis_client().delete(stream_key(thread_id))
    except RedisError:
        # Nothing reads it any more (a stream opens only on a thread of the database); it
        # holds at most AGENT_EVENTS_STREAM_MAXLEN entries.
        logger.warning("could not delete the event stream of thread %s", thread_id, exc_info=True)


def thread_create(*, user: Any, metadata: dict[str, Any]) -> Thread:
    """A thread with nothing in it yet (an Agent Protocol task created without an input)."""
    return Thread.objects.create(owner_id=user.pk, metadata=metadata)
