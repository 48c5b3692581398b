"""Writes: the run workers' beats (``WorkerBeat``), what ``/readyz`` counts as live workers."""

import datetime

from django.db.models.functions import Now
from django.utils import timezone

from agent_runs.models import WorkerBeat


def worker_beat(*, name: str, hostname: str, pid: int, queues: list[str]) -> None:
    """Record that the worker ``name`` is alive now (one upsert; its row is created by the
    first beat)."""
    WorkerBeat.objects.update_or_create(
        name=name,
        defaults={"hostname": hostname, "pid": pid, "queues": ",".join(queues), "beat_at": Now()},
        create_defaults={
            "hostname": hostname,
            "pid": pid,
            "queues": ",".join(queues),
            "started_at": timezone.now(),
            "beat_at": Now(),
        },
    )


def worker_beat_end(*, name: str) -> None:
    """The worker ``name`` stopped cleanly: it no longer counts."""
    WorkerBeat.objects.filter(name=name).delete()


def worker_beats_prune(*, older_than: datetime.timedelta) -> int:
    """Delete the rows of workers that died without a clean stop, long ago; how many."""
    deleted, _ = WorkerBeat.objects.filter(beat_at__lt=Now() - older_than).delete()
    return deleted
