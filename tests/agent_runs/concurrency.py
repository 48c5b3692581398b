"""Helpers for tests of requests that race: calls started at once in threads of their own
(each with its own database connection), held at a thread's row lock until every one of
them waits there, then let go together. For ``django_db(transaction=True)`` tests."""

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, connections, transaction

from agent_runs.models import Thread


@contextmanager
def thread_lock_held(thread_id: uuid.UUID) -> Iterator[None]:
    """Hold a thread's row lock, as a ``run_create`` in progress would, until the block ends."""
    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=thread_id)
        yield


def at_once_behind_lock(thread_id: uuid.UUID, calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Start every call while the thread's row lock is held here, wait until each one waits
    for it, let go, and give the outcomes (what each returned, or the exception it raised)
    in the calls' order. Whatever a call checks before taking the lock, it checks before
    any of them has written."""
    with thread_lock_held(thread_id):
        threads, outcomes = in_threads(calls)
        _wait_for_lock_waiters(len(calls), outcomes)
    join(threads)
    return outcomes


def in_threads(calls: Sequence[Callable[[], Any]]) -> tuple[list[threading.Thread], list[Any]]:
    """Start each call in a thread of its own; the outcomes fill the list once joined."""
    outcomes: list[Any] = [None] * len(calls)

    def target(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as exc:
            outcomes[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    return threads, outcomes


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a call never returned"


def _wait_for_lock_waiters(count: int, outcomes: list[Any]) -> None:
    deadline = time.monotonic() + 20
    while _lock_waiters() < count:
        assert time.monotonic() < deadline, f"the calls never waited on the lock: {outcomes}"
        time.sleep(0.02)


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction the statistics views keep their first snapshot: drop it.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (count,) = cursor.fetchone() or (0,)
        return int(count)
