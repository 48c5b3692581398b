"""Database work from async code (docs/architecture.md): the ORM refuses a thread whose event
loop runs, so the work goes to the shared executor's threads, and each gives its connection
back at once (a stream lives for minutes, a worker for days: a connection kept by a thread of
the executor would never be checked again)."""

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection as db_connection

T = TypeVar("T")


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
