"""A job takes its run's turn (``run_claim``: queued to running, once, when it is the run's
turn in its thread's line, services/thread_line.py) and keeps it (``runs_heartbeat``). The
claim (``Run.claim_token``) fences the job's writes (services/lifecycle.py)."""

import uuid
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agent_runs.db import columns_sql, model_from_row
from agent_runs.models import Run, RunEvent, Thread
from agent_runs.selectors.runs import run_for_execution
from agent_runs.services.thread_line import TURN_TAKEN
from agent_runs.signals import run_status_changed_send


def run_claim(*, run_pk: int) -> uuid.UUID | None:
    """Move the run from queued to running, once, and only when it is its thread's turn: no
    run of the thread is running, and none before it is queued or waiting for its journal.
    Returns the claim that fences the job's writes, or ``None``."""
    claimed = run_claim_and_load(run_pk=run_pk)
    return None if claimed is None else claimed[0].claim_token


def run_claim_and_load(*, run_pk: int) -> tuple[Run, int] | None:
    """``run_claim``, and once claimed the run as a job runs it (with its thread and its
    thread's last event id, ``run_for_execution``), in one transaction: a connection lost
    before the end leaves the run queued, so the whole may be tried again. The status
    receivers are handed the run read here (no read of their own). ``None`` when it is not
    the run's turn, or it is not queued."""
    token = uuid.uuid4()
    now = timezone.now()
    # Inside the caller's transaction, when there is one (the job's start: no savepoint).
    with transaction.atomic(savepoint=False):
        if connection.vendor == "postgresql":
            claimed = _claim_and_load_statement(run_pk=run_pk, token=token, now=now)
        else:
            claimed = _claim_and_load_orm(run_pk=run_pk, token=token, now=now)
        if claimed is None:
            return None
        run_status_changed_send(run_pk=run_pk, status=Run.Status.RUNNING, run=claimed[0])
    return claimed


def _claim_and_load_orm(*, run_pk: int, token: uuid.UUID, now: datetime) -> tuple[Run, int] | None:
    claimed = (
        Run.objects.filter(pk=run_pk, status=Run.Status.QUEUED)
        .filter(~TURN_TAKEN)
        .update(
            status=Run.Status.RUNNING,
            # A resumed run keeps when it first started (its journal's start).
            started_at=Coalesce("started_at", Value(now)),
            heartbeat_at=now,
            claim_token=token,
        )
    )
    return run_for_execution(run_pk=run_pk) if claimed else None


def _claim_and_load_statement(
    *, run_pk: int, token: uuid.UUID, now: datetime
) -> tuple[Run, int] | None:
    """The same on PostgreSQL in one statement of constant text (the ORM compiled the
    update's subqueries and the read's join again for every run: a tenth of a worker's CPU):
    the claim, the run and its thread as it left them, and the thread's last event id."""
    running, queued = Run.Status.RUNNING.value, Run.Status.QUEUED.value
    params: list[Any] = [
        *(running, now, now, token),
        *(run_pk, queued, running, queued, Run.Status.PAUSED.value, Run.Status.CANCELLED.value),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_AND_LOAD, params)
        row = cursor.fetchone()
    if row is None:
        return None
    run_width = len(Run._meta.concrete_fields)
    run = model_from_row(Run, row[:run_width])
    Run.thread.field.set_cached_value(run, model_from_row(Thread, row[run_width:-1]))
    return run, row[-1] or 0


_CLAIM_AND_LOAD = (
    f"WITH claimed AS (UPDATE {Run._meta.db_table} AS r SET status = %s, "
    # A resumed run keeps when it first started (its journal's start).
    "started_at = COALESCE(r.started_at, %s), heartbeat_at = %s, claim_token = %s "
    "WHERE r.id = %s AND r.status = %s AND NOT EXISTS ("
    # TURN_TAKEN: another run of the thread holds its turn.
    f"SELECT 1 FROM {Run._meta.db_table} AS o WHERE o.thread_id = r.thread_id AND ("
    "o.status = %s OR ((o.jumps_queue > r.jumps_queue OR (o.jumps_queue = r.jumps_queue "
    "AND o.id < r.id)) AND (o.status IN (%s, %s) OR (o.status = %s "
    "AND o.started_at IS NULL AND NOT EXISTS ("
    f"SELECT 1 FROM {RunEvent._meta.db_table} AS e WHERE e.run_id = o.id)))))) "
    f"RETURNING {columns_sql(Run, 'r')}) "
    f"SELECT {columns_sql(Run, 'claimed')}, {columns_sql(Thread, 't')}, ("
    f"SELECT e.id FROM {RunEvent._meta.db_table} AS e WHERE e.thread_id = claimed.thread_id "
    "ORDER BY e.id DESC LIMIT 1) "
    f"FROM claimed JOIN {Thread._meta.db_table} AS t ON t.id = claimed.thread_id"
)


def runs_heartbeat(*, claims: list[tuple[int, uuid.UUID]]) -> set[int]:
    """A worker's jobs are alive: at most two statements for all the runs they hold, as
    (run, claim) pairs, whatever their number; the runs that are still their jobs' (a run
    missing is no longer its job's): running under their claim, or completed under it. Only
    the job that holds a claim completes its run, and a beat can come between that commit
    and the job's end: that job is not to be stopped (RQ would count it failed)."""
    if not claims:
        return set()
    held = Q()
    for run_pk, claim_token in claims:
        held |= Q(pk=run_pk, claim_token=claim_token)
    now = timezone.now()
    ours = Run.objects.filter(held, status__in=(Run.Status.RUNNING, Run.Status.COMPLETED))
    statuses = dict(ours.values_list("pk", "status"))
    running = [pk for pk, status in statuses.items() if status == Run.Status.RUNNING]
    if running:
        Run.objects.filter(pk__in=running, status=Run.Status.RUNNING).update(heartbeat_at=now)
    return set(statuses)
