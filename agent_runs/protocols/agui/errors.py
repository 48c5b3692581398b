"""AG-UI's error shape: ``{"detail": "<message>"}`` with the spec's messages
(docs/spec/run-agent-input.md). API views get it from the project's default handler
(config/exceptions.py); the event stream, served outside DRF, renders it here."""

from typing import Any

from django.http import Http404

from agent_runs.errors import DomainError

NOT_AUTHENTICATED = (
    401,
    {"detail": "Authentication credentials were not provided."},
    [(b"www-authenticate", b"Bearer")],
)


def error_parts(exc: Exception) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]:
    """Status, body and extra headers of the error response for ``exc``."""
    if isinstance(exc, DomainError):
        return exc.status, {"detail": str(exc)}, []
    if isinstance(exc, Http404):
        return 404, {"detail": "Not found."}, []
    raise exc
