"""Ids read from a URL or a query: one that no row can have names nothing of the caller's, a
404 (each protocol's renderer words it)."""

import uuid

from django.http import Http404

from agent_runs.models import Run
from agent_runs.run_input import parse_uuid

# The longest runId a run can have: its column's.
MAX_RUN_ID_LENGTH = Run._meta.get_field("run_id").max_length or 0


def thread_id_or_404(value: str) -> uuid.UUID:
    """A ``threadId`` query parameter; one that is no UUID names no thread of the caller's."""
    thread_id = parse_uuid(value)
    if thread_id is None:
        raise Http404
    return thread_id


def run_id_or_404(value: str) -> str:
    """A runId from a URL or query; one no run can have (a NUL, too long) is a 404."""
    if "\x00" in value or len(value) > MAX_RUN_ID_LENGTH:
        raise Http404
    return value
