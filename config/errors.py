"""The base of every domain error: each carries its stable ``code`` and its HTTP ``status``,
so a protocol renders any of them in its own shape from one table (the class attributes),
whatever order they are looked at in."""


class DomainError(Exception):
    """An error the caller can act on; its message is meant for the client as it stands."""

    code = "invalid_request"
    status = 400
    # HTTP headers its answer carries, in any protocol's shape (a rate limit's Retry-After).
    headers: dict[str, str] | None = None
