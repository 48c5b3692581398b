"""Domain errors of the history API, each with its ``code`` and HTTP ``status``."""

from agent_runs.errors import DomainError


class HistoryQueryInvalid(DomainError):
    """A history query parameter is malformed (422, ``{"detail": "<message>"}``)."""

    code = "invalid_history_query"
    status = 422
