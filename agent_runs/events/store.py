"""Where the journal's batches go: one fenced ``INSERT`` of a run's events in PostgreSQL (the
ORM on SQLite), and the thread's Redis stream their entry is added to once committed.

The emitter (a job's run, or a service ending one) and the loop's journal writer (every run
of a worker) both write through these (docs/architecture.md, "The journal").
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.db import connection as db_connection
from django.db import transaction

from agent_runs.models import Run, RunEvent, Thread


def stream_key(thread_id: uuid.UUID | str) -> str:
    """One stream per thread, so a Redis cluster shards by thread."""
    return f"agent:thread:{{{thread_id}}}:events"


@cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def insert_events(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    documents: list[str],
    claim_token: uuid.UUID | None,
    at: datetime,
) -> list[int]:
    """Insert a batch of events written ``at`` and return their ids, in order; none when
    ``claim_token`` is given and the run is no longer running under it.

    On PostgreSQL, one raw multi-row ``INSERT`` on purpose: this is the hot path of every
    run. The ORM's bulk insert encodes each payload's JSON again and escapes it into an
    array parameter, which costs more than the rest of emitting; a statement per event
    costs PostgreSQL a statement's work per event. The fence is part of the statement and
    takes a share lock on the run's row, so a service ending the run (which locks the row
    for update) writes its own events after these, or these are not written at all. The
    ids come back in the order of the rows, as Django's own bulk insert relies on.
    """
    if db_connection.vendor != "postgresql":
        return _insert_events_portable(run, first_seq, payloads, claim_token, at)
    sql, params = _insert_statement(run, first_seq, payloads, documents, claim_token, at)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _insert_statement(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    documents: list[str],
    claim_token: uuid.UUID | None,
    at: datetime,
) -> tuple[str, list[Any]]:
    """The fenced multi-row INSERT of ``insert_events`` and its parameters."""
    # A write of no claim: the thread's row locked as a foreign key's check locks it (the
    # journal has none, models/events.py), so a thread deleted meanwhile gets no rows.
    fence = f"EXISTS (SELECT 1 FROM {Thread._meta.db_table} t WHERE t.id = %s FOR KEY SHARE)"
    fence_params: list[Any] = [run.thread_id]
    if claim_token is not None:
        fence = (
            f"EXISTS (SELECT 1 FROM {Run._meta.db_table} r WHERE r.id = %s "
            "AND r.claim_token = %s AND r.status = %s FOR SHARE)"
        )
        fence_params = [run.pk, claim_token, Run.Status.RUNNING.value]
    held = HeldEvents(
        first_seq=first_seq,
        types=[payload["type"] for payload in payloads],
        documents=documents,
        at=at,
    )
    sql, params = events_insert_sql(run, held, where=fence)
    return sql, [*params, *fence_params]


@dataclass(frozen=True)
class HeldEvents:
    """A run's events as the journal stores them, for one statement to write: the first
    one's ordinal in the run, each one's type and JSON, and when they are written."""

    first_seq: int
    types: list[str]
    documents: list[str]
    at: datetime


def events_insert_sql(run: Run, events: HeldEvents, *, where: str) -> tuple[str, list[Any]]:
    """The multi-row ``INSERT`` of a run's ``events`` that writes them when ``where`` holds
    (its placeholders' values follow the returned ones), returning each one's id and
    ordinal; and its parameters."""
    rows = ", ".join(["(%s::integer, %s, %s::jsonb)"] * len(events.types))
    sql = (
        f"INSERT INTO {RunEvent._meta.db_table} "
        "(thread_id, run_id, seq, type, payload, created_at) "
        "SELECT %s, %s, v.seq, v.type, v.payload, %s "
        f"FROM (VALUES {rows}) AS v(seq, type, payload) WHERE {where} "
        "RETURNING id, seq"
    )
    params: list[Any] = [run.thread_id, run.pk, events.at]
    for offset, (kind, document) in enumerate(zip(events.types, events.documents, strict=True)):
        params += (events.first_seq + offset, kind, document)
    return sql, params


def _insert_events_portable(
    run: Run,
    first_seq: int,
    payloads: list[dict[str, Any]],
    claim_token: uuid.UUID | None,
    at: datetime,
) -> list[int]:
    """The same on SQLite (the quick start), whose write lock makes check-then-insert in one
    transaction as safe as the fenced statement."""
    with transaction.atomic():
        if claim_token is None:
            fenced = Thread.objects.filter(pk=run.thread_id).exists()
        else:
            fenced = Run.objects.filter(
                pk=run.pk, claim_token=claim_token, status=Run.Status.RUNNING
            ).exists()
        if not fenced:
            return []
        rows = RunEvent.objects.bulk_create(
            [
                RunEvent(
                    thread_id=run.thread_id,
                    run=run,
                    seq=first_seq + offset,
                    type=p["type"],
                    payload=p,
                    created_at=at,
                )
                for offset, p in enumerate(payloads)
            ]
        )
    return [row.pk for row in rows]
