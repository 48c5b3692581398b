"""Pages of the REST lists: ``?limit=`` and an opaque ``?cursor=`` (the ``next`` of the page
before). A cursor is base64url JSON naming where the last page ended; clients never read it."""

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent_runs.selectors.threads import RunPosition, ThreadPosition
from config.errors import DomainError

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
# What this API writes is under 150 characters; anything much longer is not one of its own.
_MAX_CURSOR_CHARS = 300


class PageQueryInvalid(DomainError):
    """A ``limit`` or ``cursor`` this API cannot read (400, ``{"detail": "<message>"}``)."""

    code = "invalid_page_query"
    status = 400


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
    return _encode(["thread", position.updated_at.isoformat(), str(position.thread_id)])


def thread_position(cursor: str) -> ThreadPosition:
    at, thread_id = _decode(cursor, "thread")
    if not isinstance(thread_id, str):
        raise _invalid()
    try:
        return ThreadPosition(updated_at=at, thread_id=uuid.UUID(thread_id))
    except ValueError:
        raise _invalid() from None


def run_cursor(position: RunPosition) -> str:
    return _encode(["run", position.created_at.isoformat(), position.pk])


def run_position(cursor: str) -> RunPosition:
    at, pk = _decode(cursor, "run")
    if type(pk) is not int or not 0 < pk < 2**63:
        raise _invalid()
    return RunPosition(created_at=at, pk=pk)


def _encode(parts: list[Any]) -> str:
    text = json.dumps(parts, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(cursor: str, kind: str) -> tuple[datetime, Any]:
    """The time (UTC) and key a cursor of ``kind`` holds."""
    if len(cursor) > _MAX_CURSOR_CHARS:
        raise _invalid()
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(text)
    except (ValueError, binascii.Error):  # bad base64, bad UTF-8, bad JSON
        raise _invalid() from None
    if not (isinstance(parts, list) and len(parts) == 3 and parts[0] == kind):
        raise _invalid()
    try:
        at = datetime.fromisoformat(parts[1])
        if at.tzinfo is None:
            raise ValueError("a naive time")
        return at.astimezone(UTC), parts[2]
    except (TypeError, ValueError, OverflowError):  # not a string, not a time, out of range
        raise _invalid() from None


def _invalid() -> PageQueryInvalid:
    return PageQueryInvalid("cursor is not valid: pass the next value of the page before")
