"""What every tool of a run shares: the run it works for, and running its ORM work."""

from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection as db_connection


@dataclass(frozen=True)
class ToolContext:
    """What a run's tools know about the run."""

    user_id: int
    run_pk: int
    client_time: dict[str, Any] | None


async def call_sync_tool(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a tool's ORM work on a worker thread (the ORM refuses the event loop's thread),
    closing that thread's connection after: the worker lives on, and a connection kept by
    a thread of its executor would never be checked again."""

    def run() -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            db_connection.close()

    return await sync_to_async(run, thread_sensitive=False)()
