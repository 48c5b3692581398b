"""JSON-RPC error objects, A2A's way: ``{"jsonrpc": "2.0", "id", "error": {"code", "message",
"data"}}`` answered with HTTP 200, as a2a-sdk 1.3.0's server does (its
``build_error_response``, whose ``data`` is a ``google.rpc.ErrorInfo`` naming the reason).
docs/protocols/a2a.md, Errors.

The error classes are the SDK's (``a2a.utils.errors``), so each carries the code the spec
gives it: -32001 task not found, -32002 not cancelable, -32003 push notifications not
supported, -32004 unsupported operation, -32005 content type, -32009 version, and the
JSON-RPC ones (-32700 parse error, -32600, -32601, -32602, -32603). What DRF refuses before
the view runs (a body that is not JSON, no credentials) is rendered here too: a parse error
is -32700 with HTTP 200 and ``id`` null; a request without valid credentials keeps its HTTP
401 (and ``WWW-Authenticate``), which the SDK's clients raise as an HTTP error, with a
-32600 error object as its body."""

from typing import Any

from a2a.server.jsonrpc_models import JSONParseError, JSONRPCError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidRequestError,
    TaskNotFoundError,
)
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

RequestId = str | int | None


def error_body(request_id: RequestId, error: A2AError | JSONRPCError) -> dict[str, Any]:
    """The JSON-RPC error response of ``error`` to the request ``request_id``."""
    return build_error_response(request_id, error)


class A2ARpcError(Exception):
    """An A2A error raised with the id of the request it answers; ``status``: the HTTP
    status, 200 but for a refusal of the caller's credentials (an API key's 403), which
    keeps its HTTP status as a 401 does, and a rate limit's 429 (with ``headers``: its
    ``Retry-After``)."""

    def __init__(
        self,
        request_id: RequestId,
        error: A2AError | JSONRPCError,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(str(error))
        self.request_id = request_id
        self.error = error
        self.status = status
        self.headers = headers


def render(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The JSON-RPC error response for ``exc`` (``None``: a server error, left to Django)."""
    if isinstance(exc, A2ARpcError):
        return Response(
            error_body(exc.request_id, exc.error), status=exc.status, headers=exc.headers
        )
    if isinstance(exc, A2AError):
        return Response(error_body(None, exc))
    if isinstance(exc, Http404 | exceptions.NotFound):
        return Response(error_body(None, TaskNotFoundError()))
    if isinstance(exc, exceptions.ParseError):
        return Response(error_body(None, JSONParseError(message=str(exc.detail))))
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response(error_body(None, InvalidRequestError(message=str(exc.detail))))
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    message = str(data["detail"]) if isinstance(data, dict) and "detail" in data else str(data)
    error: A2AError = (
        InternalError(message=message)
        if response.status_code >= 500
        else InvalidRequestError(message=message)
    )
    headers = {
        name: value
        for name, value in response.items()
        if name.lower() in ("www-authenticate", "allow", "retry-after")
    }
    return Response(error_body(None, error), status=response.status_code, headers=headers or None)
