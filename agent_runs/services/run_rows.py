"""The SQL of ``run_create``'s one-statement writes (services/runs.py): a new row's columns
and values as Django's ``save`` would write them, and the run with its user message inserted
after a write of their thread's row. PostgreSQL only."""

from functools import cache
from typing import Any, cast

from django.db import connection
from django.db.models import Field, Model

from agent_runs.models import Message, Run, Thread


def run_and_message_insert(
    *, thread: Thread, run: Run, message: Message, thread_write: tuple[str, list[Any]]
) -> bool:
    """After ``thread_write`` (a statement on the thread's row that adds one to its
    ``last_seq``), the run and its user message with that ``seq``, in one statement; the
    run and message are stored only when the thread's row was written. PostgreSQL only."""
    thread_sql, thread_params = thread_write
    run_columns, run_values, run_params = insert_parts(run)
    message_columns, message_values, message_params = insert_parts(message, skip=("run_id", "seq"))
    seq = sql_column(Thread, "last_seq")
    sql = (
        f"WITH turn_thread AS ({thread_sql} RETURNING {seq}), "
        f"new_run AS (INSERT INTO {sql_table(Run)} ({run_columns}) SELECT {run_values} "
        f"FROM turn_thread RETURNING {sql_column(Run, 'id')}), "
        f"new_message AS (INSERT INTO {sql_table(Message)} ({sql_column(Message, 'run_id')}, "
        f"{sql_column(Message, 'seq')}, {message_columns}) SELECT new_run.{sql_column(Run, 'id')}, "
        f"turn_thread.{seq}, {message_values} FROM new_run, turn_thread) "
        f"SELECT new_run.{sql_column(Run, 'id')}, turn_thread.{seq} FROM new_run, turn_thread"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*thread_params, *run_params, *message_params])
        row = cursor.fetchone()
    if row is None:
        return False
    run.pk, thread.last_seq = row
    run._state.adding = False
    run._state.db = connection.alias
    return True


def insert_parts(obj: Model, skip: tuple[str, ...] = ()) -> tuple[str, str, list[Any]]:
    """The columns, placeholders and values of ``obj`` as a new row, as Django's ``save``
    would write them (``auto_now`` fields set; a database-generated key left out)."""
    fields, columns, placeholders = _insert_plan(type(obj), skip)
    return (
        columns,
        placeholders,
        [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields],
    )


@cache
def _insert_plan(model: type[Model], skip: tuple[str, ...]) -> tuple[list[Field], str, str]:
    """The fields of a new row of ``model`` and their columns and placeholders. Each
    placeholder is cast to its column's type without a length (a value too long is still an
    error, not cut short), so the values of an ``INSERT … SELECT`` and a ``NULL`` are typed."""
    fields = [
        field
        for field in model._meta.concrete_fields
        if field.attname not in skip and not (field.primary_key and field.db_returning)
    ]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(cast(str, field.column)) for field in fields)
    placeholders = ", ".join(
        f"%s::{_base_type(field.db_type(connection) or 'text')}" for field in fields
    )
    return fields, columns, placeholders


def _base_type(db_type: str) -> str:
    return db_type.split("(", 1)[0]


def sql_table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def sql_column(model: type[Model], name: str) -> str:
    return connection.ops.quote_name(cast(str, cast(Field, model._meta.get_field(name)).column))
