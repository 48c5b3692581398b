"""Writes of steps: a run's stages, recorded by its job as they run, and the steps a client
records itself (the Agent Protocol's spec set)."""

import functools
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Field
from django.utils import timezone

from agent_runs.errors import RunNoLongerRunning, StepNotEditable, StepTransitionInvalid
from agent_runs.events.store import HeldEvents, events_insert_sql
from agent_runs.models import Run, Step, Thread, agent_step_id
from agent_runs.services.run_request import STEP_BUDGET_KEY

# A client's step moves forward only; a step that has ended stays as it is.
_CLIENT_TRANSITIONS = {
    Step.Status.CREATED: {Step.Status.RUNNING, Step.Status.COMPLETED, Step.Status.FAILED},
    Step.Status.RUNNING: {Step.Status.COMPLETED, Step.Status.FAILED},
    Step.Status.COMPLETED: set(),
    Step.Status.FAILED: set(),
}


@dataclass(frozen=True)
class RunControl:
    """What a running run's clients ask of it: a pause, and how many stages it may run in
    all (``None``: no limit; kept in ``Run.request``, services/run_request.py)."""

    pause_requested: bool
    step_budget: int | None

    def parks_after(self, done: int) -> bool:
        """Whether the run is parked at the boundary after ``done`` stages: a pause was
        asked for, or its step budget is spent."""
        return self.pause_requested or (self.step_budget is not None and done >= self.step_budget)


@dataclass(frozen=True)
class StepEnd:
    """How a stage's step ended (``agent_step_finish``'s arguments)."""

    stage: str
    output: Any
    additional_output: dict[str, Any]
    is_last: bool


@dataclass(frozen=True)
class StepBegin:
    """The step a stage starts with (``agent_step_start``'s arguments)."""

    stage: str
    input: Any


def _lock_claimed(*, run: Run, claim_token: uuid.UUID) -> RunControl:
    claimed = (
        Run.objects.select_for_update(no_key=True)
        .filter(pk=run.pk, claim_token=claim_token, status=Run.Status.RUNNING)
        .values_list("pause_requested", "request")
        .first()
    )
    if claimed is None:
        raise RunNoLongerRunning(run.pk)
    budget = (claimed[1] or {}).get(STEP_BUDGET_KEY)
    return RunControl(pause_requested=claimed[0], step_budget=budget)


def agent_step_start(*, run: Run, claim_token: uuid.UUID, stage: str, input: Any) -> None:
    """Record that the job's run started a stage, while the run is still the job's (its row
    locked against a cancel, which fails the running step in turn); ``RunNoLongerRunning``
    otherwise. On PostgreSQL one statement: the insert fenced on the claim, as the journal's
    writes are."""
    step = _agent_step(run=run, stage=stage, input=input)
    if connection.vendor != "postgresql":
        with transaction.atomic():
            _lock_claimed(run=run, claim_token=claim_token)
            step.save(force_insert=True)
        return
    _step_insert_claimed(run=run, claim_token=claim_token, step=step)


def _agent_step(*, run: Run, stage: str, input: Any) -> Step:
    """A stage's step as it starts, not saved."""
    now = timezone.now()
    return Step(
        id=agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage=stage),
        thread_id=run.thread_id,
        run=run,
        source=Step.Source.AGENT,
        name=stage,
        status=Step.Status.RUNNING,
        input=input,
        created_at=now,
        started_at=now,
    )


def _step_insert_claimed(*, run: Run, claim_token: uuid.UUID, step: Step) -> None:
    """The step inserted in one statement if the run is still the job's (PostgreSQL)."""
    columns, placeholders = _step_insert_head()
    sql = (
        f"INSERT INTO {Step._meta.db_table} ({columns}) "
        f"SELECT {placeholders} WHERE {_CLAIMED} RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*_step_values(step), run.pk, claim_token, Run.Status.RUNNING.value])
        if cursor.fetchone() is None:
            raise RunNoLongerRunning(run.pk)


def agent_step_start_journaled(
    *, run: Run, claim_token: uuid.UUID, stage: str, input: Any, events: HeldEvents
) -> list[int]:
    """``agent_step_start`` and the events that announce it (``events``: the run's start,
    the step's) in one statement (PostgreSQL), in the caller's transaction; the events'
    ids. Its events were a round trip of their own."""
    step = _agent_step(run=run, stage=stage, input=input)
    columns, placeholders = _step_insert_head()
    journaled, journaled_params = _journaled(run, events, "EXISTS (SELECT 1 FROM begun)")
    sql = (
        f"WITH begun AS (INSERT INTO {Step._meta.db_table} ({columns}) "
        f"SELECT {placeholders} WHERE {_CLAIMED} RETURNING id), {journaled} "
        f"SELECT {JOURNALED_IDS}"
    )
    params = [
        *_step_values(step),
        *(run.pk, claim_token, Run.Status.RUNNING.value),
        *journaled_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids: list[int] = list(cursor.fetchone()[0])
    if not ids:
        raise RunNoLongerRunning(run.pk)
    return ids


def step_end_journaled_ctes(
    *, run: Run, ended: StepEnd | None, events: HeldEvents, condition: str
) -> tuple[str, list[Any]]:
    """A statement's ``stepped`` (the step of ``ended``, if any, completed) and
    ``journaled`` (``events`` written as the journal writes them), each when ``condition``
    holds (the statement's fence), and their parameters. ``JOURNALED_IDS`` selects the
    events' ids."""
    params: list[Any] = []
    stepped = ""
    if ended is not None:
        sets, values = _step_sets(
            _finish_changes(
                output=ended.output,
                additional_output=ended.additional_output,
                is_last=ended.is_last,
            )
        )
        stepped = (
            f"stepped AS (UPDATE {Step._meta.db_table} SET {sets} WHERE id = %s AND "
            f"{condition} RETURNING 1), "
        )
        step_id = agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage=ended.stage)
        params += [*values, step_id]
    journaled, journaled_params = _journaled(run, events, condition)
    return stepped + journaled, [*params, *journaled_params]


def _journaled(run: Run, events: HeldEvents, condition: str) -> tuple[str, list[Any]]:
    """A statement's ``journaled``: the run's ``events`` written as the journal writes them
    (``events_insert_sql``) when ``condition`` holds, and its parameters."""
    sql, params = events_insert_sql(run, events, where=condition)
    return f"journaled AS ({sql})", params


# The ids of the events ``journaled`` wrote, in order.
JOURNALED_IDS = "ARRAY(SELECT id FROM journaled ORDER BY seq)"


def _step_values(step: Step) -> list[Any]:
    """A step's columns' values, as its insert sends them (``_step_insert_head``)."""
    return [
        field.get_db_prep_save(getattr(step, field.attname), connection)
        for field in Step._meta.concrete_fields
    ]


def _concrete(field: Any) -> "Field[Any, Any]":
    assert isinstance(field, Field), field
    return field


def _column(field: "Field[Any, Any]") -> str:
    assert field.column is not None, field
    return field.column


@functools.cache
def _step_insert_head() -> tuple[str, str]:
    """A step's insert: its columns, and their placeholders (``_step_values`` fills them)."""
    fields = Step._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(_column(field)) for field in fields)
    return columns, ", ".join(["%s"] * len(fields))


# The fence of a job's one-statement writes: the run is still running under its claim, its
# row share-locked against a service ending it (which locks it for update).
_CLAIMED = (
    f"EXISTS (SELECT 1 FROM {Run._meta.db_table} r WHERE r.id = %s AND r.claim_token = %s "
    "AND r.status = %s FOR SHARE)"
)


def agent_step_finish(
    *,
    run: Run,
    claim_token: uuid.UUID,
    stage: str,
    output: Any,
    additional_output: dict[str, Any],
    is_last: bool,
) -> RunControl:
    """Record that the job's run finished a stage (``RunNoLongerRunning`` when the run is no
    longer the job's); what its clients ask of it now, read with the run's row lock (the job
    parks the run at this boundary if it must). On PostgreSQL one statement."""
    step_id = agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage=stage)
    changes = _finish_changes(output=output, additional_output=additional_output, is_last=is_last)
    if connection.vendor != "postgresql":
        with transaction.atomic():
            control = _lock_claimed(run=run, claim_token=claim_token)
            Step.objects.filter(pk=step_id).update(**changes)
        return control
    return _step_update_claimed(run=run, claim_token=claim_token, step_id=step_id, changes=changes)


def _finish_changes(
    *, output: Any, additional_output: dict[str, Any], is_last: bool
) -> dict[str, Any]:
    """What a stage's step's end changes of it."""
    return {
        "status": Step.Status.COMPLETED,
        "output": output,
        "additional_output": additional_output,
        "is_last": is_last,
        "completed_at": timezone.now(),
    }


def _step_sets(changes: dict[str, Any]) -> tuple[str, list[Any]]:
    """An update's ``SET`` list of a step's ``changes``, and its values."""
    fields = [_concrete(Step._meta.get_field(name)) for name in changes]
    sets = ", ".join(f"{connection.ops.quote_name(_column(field))} = %s" for field in fields)
    values = [
        field.get_db_prep_save(value, connection)
        for field, value in zip(fields, changes.values(), strict=True)
    ]
    return sets, values


def _step_update_claimed(
    *, run: Run, claim_token: uuid.UUID, step_id: uuid.UUID, changes: dict[str, Any]
) -> RunControl:
    """The step updated in one statement if the run is still the job's (PostgreSQL); what
    its clients ask of the run, read under its row's share lock."""
    sets, values = _step_sets(changes)
    # The run's row locked first (FOR SHARE, in the CTE): its flags as they are once a
    # cancel or a pause that held it has committed.
    sql = (
        f"WITH claimed AS (SELECT pause_requested, (request ->> %s::text)::integer AS "
        f"step_budget FROM {Run._meta.db_table} WHERE id = %s AND claim_token = %s AND "
        f"status = %s FOR SHARE) UPDATE {Step._meta.db_table} SET {sets} FROM claimed "
        "WHERE id = %s RETURNING claimed.pause_requested, claimed.step_budget"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [STEP_BUDGET_KEY, run.pk, claim_token, Run.Status.RUNNING.value, *values, step_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise RunNoLongerRunning(run.pk)
    return RunControl(pause_requested=row[0], step_budget=row[1])


def thread_lock_for_job(*, thread_id: uuid.UUID | None = None, run_pk: int | None = None) -> None:
    """Lock the thread's row (of ``thread_id``, or of the run ``run_pk``) at the start of a
    job's transaction that locks its run's row and writes rows that refer to the thread
    (steps, events, messages): in the order the services that change a thread's runs take
    them, the thread first, then the run. Taken the other way round, a request that locks
    the thread (a second message that interrupts the run) and the job would each wait for
    the other. ``FOR NO KEY UPDATE``: what the job's own writes take of the thread later."""
    if connection.vendor != "postgresql":
        return  # SQLite's transactions take the whole database
    with connection.cursor() as cursor:
        if thread_id is not None:
            cursor.execute(_THREAD_LOCK, [thread_id])
        else:
            cursor.execute(_THREAD_OF_RUN_LOCK, [run_pk])


_THREAD_LOCK = f"SELECT 1 FROM {Thread._meta.db_table} WHERE id = %s FOR NO KEY UPDATE"
_THREAD_OF_RUN_LOCK = (
    f"SELECT 1 FROM {Thread._meta.db_table} WHERE id = "
    f"(SELECT thread_id FROM {Run._meta.db_table} WHERE id = %s) FOR NO KEY UPDATE"
)


def agent_step_advance(
    *, run: Run, claim_token: uuid.UUID, ended: StepEnd, done: int, then: StepBegin | None
) -> tuple[RunControl, bool]:
    """A stage boundary in one transaction: the stage's step finished (``agent_step_finish``)
    and, unless the run is to be parked there (``done`` stages run), the next stage's step
    started. What the run's clients ask of it now, and whether the next step was started.
    Inside the caller's transaction, when there is one (no savepoint: it fails as a whole).
    On PostgreSQL one statement, where the two took a round trip each."""
    if then is not None and connection.vendor == "postgresql":
        return _step_advance_claimed(
            run=run, claim_token=claim_token, ended=ended, done=done, then=then
        )
    with transaction.atomic(savepoint=False):
        control = agent_step_finish(
            run=run,
            claim_token=claim_token,
            stage=ended.stage,
            output=ended.output,
            additional_output=ended.additional_output,
            is_last=ended.is_last,
        )
        if then is None or control.parks_after(done):
            return control, False
        agent_step_start(run=run, claim_token=claim_token, stage=then.stage, input=then.input)
    return control, True


def _step_advance_claimed(
    *, run: Run, claim_token: uuid.UUID, ended: StepEnd, done: int, then: StepBegin
) -> tuple[RunControl, bool]:
    """``agent_step_advance`` in one statement (PostgreSQL): the step's end as
    ``_step_update_claimed`` makes it, and the next step inserted as ``agent_step_start``
    inserts it unless the run's flags, read under its share lock, park it after ``done``
    stages (``RunControl.parks_after``, in SQL)."""
    ctes, params = _advance_ctes(
        run=run, claim_token=claim_token, ended=ended, done=done, then=then, locked=""
    )
    sql = (
        f"WITH {ctes} "
        "SELECT pause_requested, step_budget, EXISTS (SELECT 1 FROM begun) FROM finished"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise RunNoLongerRunning(run.pk)
    return RunControl(pause_requested=row[0], step_budget=row[1]), row[2]


def _advance_ctes(
    *, run: Run, claim_token: uuid.UUID, ended: StepEnd, done: int, then: StepBegin, locked: str
) -> tuple[str, list[Any]]:
    """The boundary's ``claimed`` (the run's flags, under its share lock, while it is the
    job's; ``locked``: a condition it waits for first), ``finished`` (the step's end) and
    ``begun`` (the next step, unless the run parks after ``done`` stages), and their
    parameters."""
    sets, values = _step_sets(
        _finish_changes(
            output=ended.output, additional_output=ended.additional_output, is_last=ended.is_last
        )
    )
    columns, placeholders = _step_insert_head()
    step = _agent_step(run=run, stage=then.stage, input=then.input)
    ctes = (
        f"claimed AS (SELECT pause_requested, (request ->> %s::text)::integer AS step_budget "
        f"FROM {Run._meta.db_table} WHERE id = %s AND claim_token = %s AND status = %s"
        f"{locked} FOR SHARE), "
        f"finished AS (UPDATE {Step._meta.db_table} SET {sets} FROM claimed WHERE id = %s "
        "RETURNING claimed.pause_requested, claimed.step_budget), "
        f"begun AS (INSERT INTO {Step._meta.db_table} ({columns}) SELECT {placeholders} "
        "FROM finished WHERE NOT finished.pause_requested AND (finished.step_budget IS NULL "
        "OR finished.step_budget > %s) RETURNING id)"
    )
    params = [
        *(STEP_BUDGET_KEY, run.pk, claim_token, Run.Status.RUNNING.value),
        *values,
        agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage=ended.stage),
        *_step_values(step),
        done,
    ]
    return ctes, params


def agent_step_advance_journaled(
    *,
    run: Run,
    claim_token: uuid.UUID,
    ended: StepEnd,
    done: int,
    then: StepBegin,
    events: HeldEvents,
) -> tuple[RunControl, bool, list[int]]:
    """``agent_step_advance`` with the boundary's events in one statement (PostgreSQL), on
    its own or in the caller's transaction: the thread's row locked first
    (``thread_lock_for_job``; inside a transaction that holds it, the lock held), then the
    step's end and the next step's start as ``_step_advance_claimed`` makes them, and
    ``events`` written as the journal writes them: those the boundary comes with (the
    worker's answer's end), the step's ``STEP_FINISHED``, and last the next one's
    ``STEP_STARTED``, left out when the run parks instead. What the run's clients ask of it
    now, whether the next step was started, and the ids of the events written. On its own,
    a transaction's BEGIN, lock, events and COMMIT were a round trip each.

    Every row it reads of another transaction's it locks (the run's, shared; the steps'),
    so that a wait for the thread's lock ends with the rows as that transaction left them,
    as a statement of their own after the lock would read them."""
    if connection.vendor != "postgresql":
        raise RuntimeError("one statement on PostgreSQL only")
    ctes, advance_params = _advance_ctes(
        run=run,
        claim_token=claim_token,
        ended=ended,
        done=done,
        then=then,
        locked=" AND EXISTS (SELECT 1 FROM locked)",
    )
    journaled, journaled_params = _journaled(
        run,
        events,
        "EXISTS (SELECT 1 FROM finished) AND (v.seq < %s OR EXISTS (SELECT 1 FROM begun))",
    )
    sql = (
        f"WITH locked AS (SELECT 1 FROM {Thread._meta.db_table} WHERE id = %s "
        f"FOR NO KEY UPDATE), {ctes}, {journaled} "
        f"SELECT pause_requested, step_budget, EXISTS (SELECT 1 FROM begun), {JOURNALED_IDS} "
        "FROM finished"
    )
    params: list[Any] = [
        run.thread_id,
        *advance_params,
        *journaled_params,
        events.first_seq + len(events.types) - 1,  # the last: the next step's start
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise RunNoLongerRunning(run.pk)
    return RunControl(pause_requested=row[0], step_budget=row[1]), row[2], list(row[3])


def client_step_create(
    *, thread: Thread, name: str, input: Any, additional_input: dict[str, Any]
) -> Step:
    """A step the thread's owner records (nothing runs): ``created``."""
    return Step.objects.create(
        thread=thread,
        source=Step.Source.CLIENT,
        name=name,
        input=input,
        additional_input=additional_input,
    )


def client_step_update(*, step: Step, changes: dict[str, Any]) -> Step:
    """Update a client's step: ``status`` (forward only: created → running → completed or
    failed; ``started_at`` stamped on running, ``completed_at`` on completed or failed),
    ``output``, ``additional_output``, ``is_last``. A stage of a run is the agent's:
    ``StepNotEditable`` (409); a move back or out of an ended step:
    ``StepTransitionInvalid`` (409)."""
    if step.source != Step.Source.CLIENT:
        raise StepNotEditable()
    with transaction.atomic():
        locked = Step.objects.select_for_update().get(pk=step.pk)
        editable = ("output", "additional_output", "is_last")
        fields = {name: changes[name] for name in editable if name in changes}
        status = changes.get("status")
        if status is not None and status != locked.status:
            if status not in _CLIENT_TRANSITIONS[Step.Status(locked.status)]:
                raise StepTransitionInvalid(locked.status, status)
            fields["status"] = status
            now = timezone.now()
            if status == Step.Status.RUNNING or locked.started_at is None:
                fields["started_at"] = now
            if status in (Step.Status.COMPLETED, Step.Status.FAILED):
                fields["completed_at"] = now
        for name, value in fields.items():
            setattr(locked, name, value)
        if fields:
            locked.save(update_fields=list(fields))
    return locked
