"""The Agent API's error shape: ``{"error": {"code", "message"}}``, the spec's ``Error`` model
(docs/spec/agent-api-protocol.md, 7. Error Model) under one key, so a client tells an error
from a response object at a glance. ``code`` is stable (a domain error's own code, or one of
``not_found``, ``not_authenticated``, ``invalid_request``, ``method_not_allowed``,
``unsupported_media_type``, ``not_acceptable``, ``throttled``); ``message`` says what went
wrong. Every view of the package renders its errors here (``AgentApi``), before any stream
starts: a bad request is never a 200."""

from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agent_runs.errors import DomainError


class BodyInvalid(DomainError):
    """A request body that is not an ``AgentRequest`` this server takes."""

    code = "invalid_request"
    status = 400


_CODES = {
    400: "invalid_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def render(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The error response for ``exc`` in the protocol's shape (``None``: a server error,
    left to Django)."""
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, str(exc)), status=exc.status, headers=exc.headers)
    if isinstance(exc, Http404 | exceptions.NotFound):
        message = getattr(context.get("view"), "not_found", "not found")
        return Response(error_body("not_found", message), status=404)
    response = exception_handler(exc, context)
    if response is None:
        return None
    status = response.status_code
    code = _CODES.get(status, "invalid_request")
    return Response(
        error_body(code, _message(response.data)), status=status, headers=dict(response.items())
    )


def _message(data: Any) -> str:
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])
    if isinstance(data, list):
        return "; ".join(str(item) for item in data)
    return str(data)
