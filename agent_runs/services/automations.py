"""Writes of automation jobs (docs/automations.md): a user's jobs saved with their next due
time, a job run now, and the due jobs fired (the workers' sweep, ``automations_fire_due``).

Exactly once: a worker fires a due job under the job's row lock (``SKIP LOCKED``: two
workers fire different jobs), and in the same transaction creates its run and moves
``next_run_at`` past ``now``. A worker that dies before its commit leaves the due time to
the next sweep; one that dies after it leaves a run that is its run's to finish (the run's
own recovery: ``runs_recover``)."""

import datetime
import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from agent_runs.agent_config import automation_config_check
from agent_runs.errors import (
    AutomationJobBusy,
    AutomationJobInvalid,
    AutomationJobNameTaken,
    DomainError,
)
from agent_runs.models import RUN_ACTIVE_STATUSES, AutomationJob, MultitaskStrategy, Run
from agent_runs.run_input import AUTOMATION_JOB_CONTEXT, RunAgentInput
from agent_runs.schedules import (
    DueTimes,
    ScheduleInvalid,
    due_times,
    next_fire_time,
    schedule_check,
    zone_get,
)
from agent_runs.services.runs import RunOptions, run_create

logger = logging.getLogger(__name__)

# What decides a job's next due time: a change of one recomputes it from now.
_SCHEDULE_FIELDS = ("schedule", "timezone", "enabled")
# What the workers write: a save of the job's settings keeps the stored values.
_WORKER_FIELDS = ("next_run_at", "thread_id", "last_run_id", "last_outcome", "last_outcome_at")


def automation_job_check(job: AutomationJob) -> None:
    """The job's fields are valid (``AutomationJobInvalid`` naming the first that is not);
    its schedule is stored in its normal form (single spaces)."""
    if job.schedule.strip():
        try:
            job.schedule = schedule_check(job.schedule)
        except ScheduleInvalid as exc:
            raise AutomationJobInvalid("schedule", str(exc)) from exc
        if job.owner_id is None:
            raise AutomationJobInvalid("schedule", "a job runs on a schedule for its owner only")
        if not job.prompt.strip():
            raise AutomationJobInvalid("prompt", "a job on a schedule sends a prompt")
    else:
        job.schedule = ""
    try:
        zone_get(job.timezone)
    except ScheduleInvalid as exc:
        raise AutomationJobInvalid("timezone", str(exc)) from exc
    try:
        automation_config_check(job.config)
    except ValueError as exc:
        raise AutomationJobInvalid("config", str(exc)) from exc


def automation_job_create(
    *, owner: AbstractBaseUser, now: datetime.datetime | None = None, **fields: Any
) -> AutomationJob:
    """A job of ``owner``'s, its first due time set (``AutomationJobInvalid``: nothing saved).
    The owner's config names no MCP server (``_owner_config_check``)."""
    _owner_config_check(fields.get("config"))
    return automation_job_save(job=AutomationJob(owner_id=owner.pk, **fields), now=now)


def automation_job_update(
    *, job: AutomationJob, now: datetime.datetime | None = None, **fields: Any
) -> AutomationJob:
    """The job with ``fields`` changed by its owner. Its name is what its runs name: it
    cannot change."""
    if "name" in fields and fields["name"] != job.name:
        raise AutomationJobInvalid("name", "a job's name cannot change (its runs name it)")
    _owner_config_check(fields.get("config"))
    for name, value in fields.items():
        setattr(job, name, value)
    return automation_job_save(job=job, now=now)


def _owner_config_check(config: Any) -> None:
    """A config its owner writes names no MCP server: a server's URL is reached from the
    workers and its headers are read from their environment, so only staff (the admin)
    configure one."""
    stages = [config, *config.values()] if isinstance(config, dict) else []
    if any(isinstance(stage, dict) and "mcp_servers" in stage for stage in stages):
        raise AutomationJobInvalid("config", "mcp_servers are configured by staff only")


def automation_job_save(
    *, job: AutomationJob, now: datetime.datetime | None = None
) -> AutomationJob:
    """Check and save the job (new or changed, by the API or the admin), under its row lock.
    Its next due time is computed from ``now`` when it is new or its schedule, timezone or
    enabled changed; otherwise the stored one is kept, as are the other fields the workers
    write (a sweep may have fired the job since ``job`` was read: an older ``next_run_at``
    saved back would fire a due time again)."""
    automation_job_check(job)
    now = now or timezone.now()
    try:
        with transaction.atomic():
            stored = (
                AutomationJob.objects.select_for_update().filter(pk=job.pk).first()
                if job.pk
                else None
            )
            if stored is not None:
                for name in _WORKER_FIELDS:
                    setattr(job, name, getattr(stored, name))
            changed = stored is None or any(
                getattr(stored, name) != getattr(job, name) for name in _SCHEDULE_FIELDS
            )
            if changed or (job.next_run_at is None and job.enabled and job.schedule):
                job.next_run_at = _next_run_at(job, now)
            job.save()
    except IntegrityError as exc:
        raise AutomationJobNameTaken(job.name) from exc
    return job


def automation_job_delete(*, job: AutomationJob) -> None:
    """Delete the job; its runs stay (they name it)."""
    job.delete()


def automation_job_run(*, job: AutomationJob, now: datetime.datetime | None = None) -> Run:
    """Run the job now, whatever its schedule (its next due time is kept). A job whose
    ``multitask`` is ``reject`` refuses while its previous run is going (``AutomationJobBusy``)."""
    if not job.prompt.strip():
        raise AutomationJobInvalid("prompt", "the job has no prompt to send")
    now = now or timezone.now()
    with transaction.atomic():
        locked = AutomationJob.objects.select_for_update().get(pk=job.pk)
        run = _job_run_create(
            job=locked, run_id=f"automation-{job.pk}-manual-{uuid.uuid4().hex[:12]}", at=now
        )
        _outcome_save(locked, now=now, outcome=f"run {run.run_id} made by hand", run=run)
    job.refresh_from_db()
    return run


def automations_fire_due(*, now: datetime.datetime | None = None) -> int:
    """Fire every job due at ``now`` (by default the clock's): each due time makes one
    automation run, or records why it made none; how many runs were made. One transaction
    per job, holding its row lock (jobs another worker is firing are skipped, not waited
    for)."""
    now = now or timezone.now()
    made = 0
    while True:
        with transaction.atomic():
            job = (
                AutomationJob.objects.select_for_update(skip_locked=True)
                .filter(enabled=True, next_run_at__lte=now)
                .order_by("next_run_at")
                .first()
            )
            if job is None:
                return made
            made += _fire(job=job, now=now)


def _fire(*, job: AutomationJob, now: datetime.datetime) -> int:
    """Fire the due job (locked by the caller): one run for its due times, by its catch-up
    rule, and its next due time after ``now``."""
    run: Run | None = None
    due: DueTimes | None
    try:
        due = _due(job, now)
        job.next_run_at = due.next_at
        grace = datetime.timedelta(seconds=settings.AUTOMATION_MISSED_AFTER_SECONDS)
        if job.catch_up == AutomationJob.CatchUp.SKIP:
            if now - due.latest > grace:
                outcome = f"skipped: {_times(due.count)} missed (catch-up: skip)"
                due = None
            else:  # the latest is on time; any before it were missed
                due = DueTimes(first=due.latest, latest=due.latest, count=1, next_at=due.next_at)
        if due is not None:
            run = _fire_run(job=job, due=due)
            outcome = f"run {run.run_id} for {_times(due.count)}"
    except DatabaseError:
        raise  # the next sweep tries again
    except (DomainError, Http404) as exc:
        why = str(exc) if isinstance(exc, DomainError) else "the job's thread is not the owner's"
        outcome = f"skipped: {why}"
    except Exception as exc:  # a bug must not fire the job at every sweep, nor stop the others
        outcome = _fire_failed(job, now, exc)
    logger.info("automation job %s (%s): %s", job.pk, job.name, outcome)
    _outcome_save(job, now=now, outcome=outcome, run=run)
    return 0 if run is None else 1


def _fire_failed(job: AutomationJob, now: datetime.datetime, exc: Exception) -> str:
    """Log the bug (inside its ``except``), and move the job's due time past ``now``."""
    logger.exception("automation job %s failed to fire", job.pk)
    if job.next_run_at is not None and job.next_run_at <= now:
        try:
            job.next_run_at = _next_run_at(job, now)
        except Exception:  # a schedule that cannot be read: it stops until saved again
            job.next_run_at = None
    return f"failed: {type(exc).__name__}"


def _due(job: AutomationJob, now: datetime.datetime) -> DueTimes:
    assert job.next_run_at is not None
    return due_times(
        expression=job.schedule, zone=zone_get(job.timezone), first=job.next_run_at, now=now
    )


def _fire_run(*, job: AutomationJob, due: DueTimes) -> Run:
    """The run of a due time (its runId names the job and the latest time it stands for),
    in a savepoint: a refusal leaves nothing of it."""
    with transaction.atomic():
        return _job_run_create(
            job=job,
            run_id=f"automation-{job.pk}-{due.latest:%Y%m%dT%H%MZ}",
            at=due.latest,
            due=due,
        )


def _job_run_create(
    *, job: AutomationJob, run_id: str, at: datetime.datetime, due: DueTimes | None = None
) -> Run:
    """An ``automation`` run of the job's owner with the job's prompt, on a new thread or
    the job's own (``thread_policy``). The caller holds the job's row lock."""
    owner = job.owner
    if owner is None:
        raise AutomationJobInvalid("owner", "a shared job has no owner to run it for")
    if job.multitask == MultitaskStrategy.REJECT and _last_run_active(job):
        raise AutomationJobBusy()
    same = job.thread_policy == AutomationJob.ThreadPolicy.SAME
    thread_id = job.thread_id if same and job.thread_id else uuid.uuid4()
    run_input = _job_run_input(job=job, run_id=run_id, thread_id=thread_id, at=at)
    request = {"automation": _run_request(job=job, due=due)}
    # On a ``same`` thread busy with a run (the job's or its owner's), the job's strategy
    # decides as for any new message (docs/protocols/multitask.md).
    run = run_create(
        user=owner,
        run_input=run_input,
        options=RunOptions(request=request),
        multitask=job.multitask,
    )
    if same:
        job.thread_id = run.thread_id
    return run


def _job_run_input(
    *, job: AutomationJob, run_id: str, thread_id: uuid.UUID, at: datetime.datetime
) -> RunAgentInput:
    """The job's prompt as a user message, with the job named in its context and the due
    time as the client's time in the job's timezone."""
    local = at.astimezone(zone_get(job.timezone))
    return RunAgentInput.model_validate(
        {
            "threadId": str(thread_id),
            "runId": run_id,
            "messages": [{"id": f"msg-{run_id}", "role": "user", "content": job.prompt}],
            "context": [{"description": AUTOMATION_JOB_CONTEXT, "value": job.name}],
            "forwardedProps": {
                "runtime_mode": Run.RuntimeMode.AUTOMATION,
                "client_time": {
                    "device_timezone": job.timezone,
                    "client_now_iso": local.isoformat(),
                    "client_epoch_ms": int(at.timestamp() * 1000),
                },
            },
        }
    )


def _run_request(*, job: AutomationJob, due: DueTimes | None) -> dict[str, Any]:
    """What the run stands for, kept with it (``Run.request``): its job, and the due times
    (none for a run made by hand)."""
    if due is None:
        return {"job": job.pk, "trigger": "manual"}
    return {
        "job": job.pk,
        "trigger": "schedule",
        "dueTimes": due.count,
        "firstDueAt": due.first.isoformat(),
        "latestDueAt": due.latest.isoformat(),
    }


def _last_run_active(job: AutomationJob) -> bool:
    return (
        job.last_run_id is not None
        and Run.objects.filter(pk=job.last_run_id, status__in=RUN_ACTIVE_STATUSES).exists()
    )


def _next_run_at(job: AutomationJob, now: datetime.datetime) -> datetime.datetime | None:
    if not (job.enabled and job.schedule):
        return None
    return next_fire_time(expression=job.schedule, zone=zone_get(job.timezone), after=now)


def _outcome_save(
    job: AutomationJob, *, now: datetime.datetime, outcome: str, run: Run | None
) -> None:
    job.last_outcome = outcome[:300]
    job.last_outcome_at = now
    fields = ["next_run_at", "last_outcome", "last_outcome_at", "thread", "updated_at"]
    if run is not None:
        job.last_run = run
        fields.append("last_run")
    job.save(update_fields=fields)


def _times(count: int) -> str:
    return "1 due time" if count == 1 else f"{count} due times"
