"""Database work from async code (docs/architecture.md): the ORM refuses a thread whose event
loop runs, so the work goes to the shared executor's threads, and each gives its connection
back at once (a stream lives for minutes, a worker for days: a connection kept by a thread of
the executor would never be checked again).

And models read by a raw statement (a run's hot path writes and reads in one statement where
the ORM would take several, or compile each again): ``columns_sql`` and ``model_from_row``."""

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection as db_connection
from django.db.models import Model

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


def model_from_row(model: type[M], values: Sequence[Any]) -> M:
    """An instance of ``model`` from a raw row of its concrete fields' columns (``columns_sql``),
    each value converted from the database as the ORM converts it."""
    attnames, converters = _row_reader(model)
    converted = list(values)
    for index, convert in converters:
        converted[index] = convert(converted[index], None, db_connection)
    return model.from_db(db_connection.alias, attnames, converted)


@cache
def _row_reader(
    model: type[Model],
) -> tuple[list[str], list[tuple[int, Callable[..., Any]]]]:
    fields = model._meta.concrete_fields
    converters = [
        (index, field.from_db_value)
        for index, field in enumerate(fields)
        if hasattr(field, "from_db_value")
    ]
    return [field.attname for field in fields], converters
