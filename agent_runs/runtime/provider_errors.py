"""The errors of a model call, whichever path made it (the lean OpenAI-compatible model, the
SDK models, LiteLLM): shaped as the ``openai`` SDK's (a connection error, a timeout, a status
error per status the SDK names), and the one retry policy AgentScope applies to them.
"""

from typing import Any


class ProviderError(Exception):
    """A model call failed at the provider: ``body`` is the error object it sent, if any."""

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class ProviderConnectionError(ProviderError):
    """The request got no (whole) answer."""


class ProviderTimeoutError(ProviderConnectionError):
    def __init__(self) -> None:
        super().__init__("Request timed out.")


class ProviderStatusError(ProviderError):
    """The provider answered 4xx or 5xx."""

    def __init__(self, message: str, *, status_code: int, body: Any = None) -> None:
        super().__init__(message, body=body)
        self.status_code = status_code


class BadRequestError(ProviderStatusError):
    """400: the request is wrong, retrying it is useless."""


class AuthenticationError(ProviderStatusError):
    """401."""


class PermissionDeniedError(ProviderStatusError):
    """403."""


class NotFoundError(ProviderStatusError):
    """404."""


class ConflictError(ProviderStatusError):
    """409."""


class UnprocessableEntityError(ProviderStatusError):
    """422."""


class RateLimitError(ProviderStatusError):
    """429: retried."""


class InternalServerError(ProviderStatusError):
    """5xx: retried."""


# The one retry policy of every provider path (this lean one, the SDK models, LiteLLM): the
# errors AgentScope retries, and those after which a structured output falls back to a
# plain call.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    ProviderConnectionError,
    RateLimitError,
    InternalServerError,
)
STRUCTURED_OUTPUT_FALLBACK_ERRORS: tuple[type[Exception], ...] = (BadRequestError,)


def transport_error(exc: BaseException) -> ProviderConnectionError:
    """The error of a request that got no (whole) answer."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return ProviderTimeoutError()
    return ProviderConnectionError(str(exc) or "Connection error.")


def status_error(status: int, message: str, *, body: Any = None) -> ProviderStatusError:
    """The error of a 4xx/5xx answer: the class the SDK names for its status."""
    kind = _STATUS_ERRORS.get(status)
    if kind is None:
        kind = InternalServerError if status >= 500 else ProviderStatusError
    return kind(message, status_code=status, body=body)


_STATUS_ERRORS: dict[int, type[ProviderStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def provider_error(exc: Exception) -> ProviderError:
    """The lean path's error for an SDK's: by its HTTP status if it has one (``status_code``;
    google-genai's ``code``), else a timeout or a connection error."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return ProviderTimeoutError()
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(exc, "code", None)
    if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
        return status_error(status, message, body=getattr(exc, "body", None))
    return ProviderConnectionError(message)


class ProviderRetries:
    """AgentScope's retry policy of every provider's model: mixed in before its
    ``ChatModelBase``."""

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return RETRYABLE_ERRORS

    @classmethod
    def _get_structured_output_fallback_exceptions(cls) -> tuple[type[Exception], ...]:
        return STRUCTURED_OUTPUT_FALLBACK_ERRORS
