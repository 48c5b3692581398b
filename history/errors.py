"""Domain errors of the history API; config/exceptions.py maps each to its HTTP status."""


class HistoryQueryInvalid(Exception):
    """A history query parameter is malformed (422, ``{"detail": "<message>"}``)."""
