"""Automation jobs, as their owner sees them (docs/automations.md), and each job's runs."""

import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404

from agent_runs.models import AutomationJob, Run
from agent_runs.schedules import ScheduleInvalid, next_fire_time, zone_get


def automation_jobs_of_user(*, user: Any) -> QuerySet[AutomationJob]:
    """The user's jobs, by name (shared jobs are the staff's, not listed)."""
    return AutomationJob.objects.filter(owner_id=user.pk).order_by("name", "pk")


def automation_job_get_for_user(*, user: Any, job_id: int | str) -> AutomationJob:
    """The user's job ``job_id`` (its id, or the id as its path spells it); ``Http404`` for
    another's, a shared one, none, or an id that is not one."""
    if isinstance(job_id, str):
        if not (job_id.isascii() and job_id.isdigit() and len(job_id) <= 18):
            raise Http404
        job_id = int(job_id)
    job = AutomationJob.objects.filter(owner_id=user.pk, pk=job_id).first()
    if job is None:
        raise Http404
    return job


def automation_job_runs(*, job: AutomationJob) -> QuerySet[Run]:
    """The job's runs: its owner's automation runs that name it (those its schedule made,
    those made by hand, and those a client started naming it). A shared job's are the runs
    naming it of users without a job of their own by that name."""
    runs = Run.objects.filter(
        runtime_mode=Run.RuntimeMode.AUTOMATION, automation_job=job.name
    ).select_related("thread")
    if job.owner_id is not None:
        return runs.filter(thread__owner_id=job.owner_id)
    own_job = AutomationJob.objects.filter(name=job.name, owner_id=OuterRef("thread__owner_id"))
    return runs.filter(~Exists(own_job))


def automation_job_next_times(*, job: AutomationJob, count: int) -> list[datetime.datetime]:
    """The job's next ``count`` due times (UTC), the first its ``next_run_at``; none for a
    job disabled or without a schedule."""
    if not (job.enabled and job.schedule and job.next_run_at):
        return []
    times = [job.next_run_at]
    try:
        zone = zone_get(job.timezone)
        while len(times) < count:
            following = next_fire_time(expression=job.schedule, zone=zone, after=times[-1])
            if following is None:
                break
            times.append(following)
    except ScheduleInvalid:
        pass
    return times
