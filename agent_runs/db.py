"""Database work from async code (docs/architecture.md): the ORM refuses a thread whose event
loop runs, so the work goes to the shared executor's threads, and each gives its connection
back at once (a stream lives for minutes, a worker for days: a connection kept by a thread of
the executor would never be checked again).

And models read by a raw statement (a run's hot path writes and reads in one statement where
the ORM would take several, or compile each again): ``columns_sql`` and ``model_from_row``,
``db_value`` for one column; reads that do not depend on one another in one round trip
(``rows_together``)."""

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection as db_connection
from django.db.models import Field, Model

T = TypeVar("T")
M = TypeVar("M", bound=Model)


async def db_call(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` on a thread of the shared executor, its connection closed
    after."""

    def call() -> T:
        try:
            return function(*args, **kwargs)
        finally:
            db_connection.close()

    # The shared executor, not a thread of the caller's own: a stream holds no thread.
    return await sync_to_async(call, thread_sensitive=False)()


def columns_sql(model: type[Model], alias: str) -> str:
    """``alias."column", …`` for the model's concrete fields, in their order: what
    ``model_from_row`` reads."""
    quote = db_connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(str(field.column))}" for field in model._meta.concrete_fields)


def json_column(value: Any) -> Any:
    """A JSON column as a raw statement reads it: its text (Django reads PostgreSQL's jsonb
    as text, and SQLite has nothing else), or the value itself where a driver decodes it."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def model_from_row(model: type[M], values: Sequence[Any]) -> M:
    """An instance of ``model`` from a raw row of its concrete fields' columns (``columns_sql``),
    each value converted from the database as the ORM converts it (the backend's converters,
    then the field's)."""
    attnames, converters = _row_reader(model, db_connection.vendor)
    converted = list(values)
    for index, field_converters in converters:
        value = converted[index]
        for convert, expression in field_converters:
            value = convert(value, expression, db_connection)
        converted[index] = value
    return model.from_db(db_connection.alias, attnames, converted)


@cache
def _row_reader(
    model: type[Model], vendor: str
) -> tuple[list[str], list[tuple[int, list[tuple[Callable[..., Any], Any]]]]]:
    converters = []
    for index, field in enumerate(model._meta.concrete_fields):
        found = _field_converters(model, field.name, vendor)
        if found:
            converters.append((index, found))
    return [field.attname for field in model._meta.concrete_fields], converters


def db_value(model: type[Model], field_name: str, value: Any) -> Any:
    """A value of the model's field as a raw statement read it, converted as the ORM converts
    it (a time is text on SQLite)."""
    for convert, expression in _field_converters(model, field_name, db_connection.vendor):
        value = convert(value, expression, db_connection)
    return value


@cache
def _field_converters(
    model: type[Model], field_name: str, vendor: str
) -> list[tuple[Callable[..., Any], Any]]:
    field = model._meta.get_field(field_name)
    assert isinstance(field, Field), f"{field_name} is a column of {model.__name__}"
    column = field.get_col(model._meta.db_table)
    found = [*db_connection.ops.get_db_converters(column), *field.get_db_converters(db_connection)]
    return [(convert, column) for convert in found]


def db_param(model: type[Model], field_name: str, value: Any) -> Any:
    """``value`` as a raw statement's parameter for the model's field (a UUID is text on
    SQLite)."""
    field = model._meta.get_field(field_name)
    target: Any = getattr(field, "target_field", field)
    return target.get_db_prep_value(value, db_connection)


def rows_together(statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
    """Each statement's rows, the statements sent at once on PostgreSQL (its pipeline mode:
    one round trip for all, where each took one of its own), one after another elsewhere.
    For reads that do not depend on one another: an error is raised once all were sent."""
    if db_connection.vendor != "postgresql":
        found = []
        for sql, params in statements:
            with db_connection.cursor() as cursor:
                cursor.execute(sql, params)
                found.append(cursor.fetchall())
        return found
    db_connection.ensure_connection()
    cursors = [db_connection.cursor() for _ in statements]
    try:
        with db_connection.connection.pipeline():
            for cursor, (sql, params) in zip(cursors, statements, strict=True):
                cursor.execute(sql, params)
        return [cursor.fetchall() for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()
