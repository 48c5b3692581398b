"""What the service's own REST resources read from a request: the pages of their lists,
``?limit=`` and a ``?cursor=`` (the ``next`` of the page before).
A cursor names where the last page ended, a time and a key: ``t<µs>.<thread id>`` for the
threads, ``r<µs>.<run pk>`` for a thread's runs, ``i<µs>.<interrupt id>`` for interrupts
(the time in microseconds since the epoch). Clients never read it; any value of that form is
a place in its list (``THREAD_CURSOR``, ``RUN_CURSOR`` and ``INTERRUPT_CURSOR`` are its
patterns, in the schema too)."""

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agent_runs.resources.errors import PageQueryInvalid
from agent_runs.selectors.interrupts import InterruptPosition
from agent_runs.selectors.threads import RunPosition, ThreadPosition

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
# A time of at most 16 digits (before the year 2287) and a key: a thread's UUID as 32 hex
# digits, a run's primary key (a positive bigint of at most 18 digits).
THREAD_CURSOR = r"^t[0-9]{1,16}\.[0-9a-f]{32}$"
RUN_CURSOR = r"^r[0-9]{1,16}\.[1-9][0-9]{0,17}$"
# An interrupt's key is its id, ``int-`` and 32 hex digits (agent_runs/services/interrupts.py).
INTERRUPT_CURSOR = r"^i[0-9]{1,16}\.int-[0-9a-f]{32}$"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class PageQuery:
    limit: int
    cursor: str | None


def parse_page_query(params: Mapping[str, str]) -> PageQuery:
    """``limit`` (1 to ``MAX_LIMIT``, default ``DEFAULT_LIMIT``) and ``cursor``."""
    raw_limit = params.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        if not (raw_limit.isascii() and raw_limit.isdigit() and 1 <= int(raw_limit) <= MAX_LIMIT):
            raise PageQueryInvalid(f"limit must be a whole number from 1 to {MAX_LIMIT}")
        limit = int(raw_limit)
    return PageQuery(limit=limit, cursor=params.get("cursor"))


def thread_cursor(position: ThreadPosition) -> str:
    return f"t{_microseconds(position.updated_at)}.{position.thread_id.hex}"


def thread_position(cursor: str) -> ThreadPosition:
    at, key = _decode(cursor, THREAD_CURSOR)
    return ThreadPosition(updated_at=at, thread_id=uuid.UUID(hex=key))


def run_cursor(position: RunPosition) -> str:
    return f"r{_microseconds(position.created_at)}.{position.pk}"


def run_position(cursor: str) -> RunPosition:
    at, key = _decode(cursor, RUN_CURSOR)
    return RunPosition(created_at=at, pk=int(key))


def interrupt_cursor(position: InterruptPosition) -> str:
    return f"i{_microseconds(position.created_at)}.{position.interrupt_id}"


def interrupt_position(cursor: str) -> InterruptPosition:
    at, key = _decode(cursor, INTERRUPT_CURSOR)
    return InterruptPosition(created_at=at, interrupt_id=key)


def _microseconds(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _decode(cursor: str, pattern: str) -> tuple[datetime, str]:
    """The time (UTC) and key of a cursor of ``pattern``'s form."""
    if not re.fullmatch(pattern, cursor):
        raise _invalid()
    at, key = cursor[1:].split(".")
    return _EPOCH + timedelta(microseconds=int(at)), key


def _invalid() -> PageQueryInvalid:
    return PageQueryInvalid("cursor is not valid: pass the next value of the page before")
