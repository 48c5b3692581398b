"""A thread's line: the order its runs take their turns in, and whose turn it is
(services/lifecycle.py passes the turn on, services/run_claim.py takes it). Reads only.

Not ended, and holding its place in its thread's line: a run queued, running or parked (a
parked run keeps it until it is resumed or cancelled), or cancelled while queued with its
journal not written yet.
"""

import uuid

from django.db import connection
from django.db.models import Exists, OuterRef, Q

from agent_runs.db import columns_sql, model_from_row
from agent_runs.models import RUN_ACTIVE_STATUSES, Run, RunEvent

# Cancelled while queued, its journal not written yet: it still holds its place in line.
ENDED_UNSTARTED = Q(status=Run.Status.CANCELLED, started_at=None) & ~Exists(
    RunEvent.objects.filter(run_id=OuterRef("pk"))
)


# A thread's line: the runs that jump the queue (made by a multitask ``interrupt`` or
# ``rollback``) first, then by id. A run before another in that order:
_BEFORE = Q(jumps_queue__gt=OuterRef("jumps_queue")) | Q(
    jumps_queue=OuterRef("jumps_queue"), pk__lt=OuterRef("pk")
)
LINE_ORDER = ("-jumps_queue", "pk")

# Another run of the thread holds its turn: one running, or one before it in line queued,
# parked or cancelled unstarted. Built once: a filter copies what it resolves.
TURN_TAKEN = Exists(
    Run.objects.filter(thread_id=OuterRef("thread_id")).filter(
        Q(status=Run.Status.RUNNING)
        | (Q(status__in=(Run.Status.QUEUED, Run.Status.PAUSED)) & _BEFORE)
        | (ENDED_UNSTARTED & _BEFORE)
    )
)


def line_head(*, thread_id: uuid.UUID) -> Run | None:
    """The first of the thread's runs in line (``LINE_ORDER``) still holding its place:
    running, queued, or cancelled while queued with its journal not written yet. On
    PostgreSQL a statement of constant text (every run's job asks it as it ends)."""
    if connection.vendor != "postgresql":
        return (
            Run.objects.filter(thread_id=thread_id)
            .filter(Q(status__in=RUN_ACTIVE_STATUSES) | ENDED_UNSTARTED)
            .order_by(*LINE_ORDER)
            .first()
        )
    with connection.cursor() as cursor:
        cursor.execute(_LINE_HEAD, [thread_id, *RUN_ACTIVE_STATUSES, Run.Status.CANCELLED])
        row = cursor.fetchone()
    return None if row is None else model_from_row(Run, row)


_LINE_HEAD = (
    f"SELECT {columns_sql(Run, 'r')} FROM {Run._meta.db_table} AS r WHERE r.thread_id = %s "
    "AND (r.status IN (%s, %s, %s) OR (r.status = %s AND r.started_at IS NULL AND NOT EXISTS ("
    f"SELECT 1 FROM {RunEvent._meta.db_table} AS e WHERE e.run_id = r.id))) "
    "ORDER BY r.jumps_queue DESC, r.id LIMIT 1"
)
