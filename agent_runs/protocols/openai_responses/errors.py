"""The OpenAI error shape: ``{"error": {"message", "type", "param", "code"}}`` with the
statuses the OpenAI SDK maps to its exceptions (400 ``BadRequestError``, 401, 404
``NotFoundError``, 409 ``ConflictError``, …). docs/protocols/openai-responses.md, Errors.
Every API view of the package renders its errors here (``ResponsesApi``)."""

from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agent_runs.errors import DomainError

# The error ``type`` OpenAI gives each status.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    410: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ResponsesError(DomainError):
    """A request the Responses API refuses; ``param`` names the field at fault."""

    code = "invalid_request"
    status = 400

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        if code is not None:
            self.code = code


class ResponseNotFound(ResponsesError):
    code = "not_found"
    status = 404

    def __init__(self, response_id: str, *, param: str | None = None) -> None:
        super().__init__(f"Response with id '{response_id}' not found.", param=param)


class ConversationNotFound(ResponsesError):
    code = "not_found"
    status = 404

    def __init__(self, conversation: str) -> None:
        super().__init__(f"Conversation with id '{conversation}' not found.", param="conversation")


class PreviousResponseNotLatest(ResponsesError):
    """``previous_response_id`` names a response its conversation has gone on from: a fork,
    which the run core's threads do not have."""

    code = "previous_response_not_latest"

    def __init__(self, response_id: str) -> None:
        super().__init__(
            f"Previous response '{response_id}' is not the latest response of its "
            "conversation: continue from the latest one.",
            param="previous_response_id",
        )


class ConversationBusy(ResponsesError):
    """The conversation has a response still in progress: a new turn would start before
    it ends. Answered with ``x-should-retry: false``: the SDK would retry a 409 at once."""

    code = "conversation_locked"
    status = 409

    def __init__(self, param: str) -> None:
        super().__init__(
            "Another response is in progress for this conversation: wait for it to finish "
            "or cancel it.",
            param=param,
        )


class ApprovalPending(ResponsesError):
    """A new user message on a conversation whose latest response waits on approval
    requests: they are answered first."""

    code = "approval_pending"
    status = 409

    def __init__(self, approval_request_id: str) -> None:
        super().__init__(
            f"The conversation waits on approval request '{approval_request_id}': answer it "
            "with an mcp_approval_response input item (previous_response_id: the response "
            "that asked) before a new message.",
            param="input",
        )


class ApprovalRequestNotFound(ResponsesError):
    """An ``mcp_approval_response`` names no approval request of the previous response."""

    code = "approval_request_not_found"

    def __init__(self, approval_request_id: str, *, response_id: str, param: str) -> None:
        super().__init__(
            f"Response '{response_id}' has no approval request '{approval_request_id}'.",
            param=param,
        )


class ApprovalRequestClosed(ResponsesError):
    """The approval request is answered already (through this API or any other), or was
    cancelled; ``answered_by``: the response (run) that went on with the answer."""

    code = "approval_request_closed"
    status = 409

    def __init__(
        self, approval_request_id: str, *, state: str, answered_by: str | None, param: str
    ) -> None:
        goes_on = f" The conversation goes on in response '{answered_by}'." if answered_by else ""
        super().__init__(
            f"Approval request '{approval_request_id}' is not open: it is {state}.{goes_on}",
            param=param,
        )


class ApprovalRequestExpired(ResponsesError):
    code = "approval_request_expired"
    status = 410

    def __init__(self, approval_request_id: str, *, param: str) -> None:
        super().__init__(f"Approval request '{approval_request_id}' has expired.", param=param)


class ApprovalResponsesMissing(ResponsesError):
    """The request leaves some of the conversation's open approval requests unanswered:
    one request answers them all."""

    code = "approval_responses_missing"

    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "Every open approval request is answered in one request (an mcp_approval_response "
            f"item each); missing: {', '.join(missing)}.",
            param="input",
        )


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_answer(exc: DomainError) -> tuple[int, dict[str, Any]]:
    """The status and body of a domain error in OpenAI's shape; a budget reached is OpenAI's
    own quota error (a 429 ``insufficient_quota``, which its SDK raises as a rate limit)."""
    if exc.code == _BUDGET_EXCEEDED:
        quota = {"message": str(exc), "type": _QUOTA, "param": None, "code": _QUOTA}
        return 429, {"error": quota}
    body = error_body(exc.status, str(exc), param=getattr(exc, "param", None), code=exc.code)
    return exc.status, body


_BUDGET_EXCEEDED = "budget_exceeded"  # agent_runs.usage.BudgetExceeded's code
_QUOTA = "insufficient_quota"


def render(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The error response for ``exc`` in OpenAI's shape (``None``: a server error, left to
    Django)."""
    if isinstance(exc, DomainError):
        status, body = error_answer(exc)
        # The SDK retries a 409 at once, twice, and a 429 later: a conflict stays one, and
        # a budget stays reached until its period resets.
        stay = status == 409 or exc.code == _BUDGET_EXCEEDED
        headers = {**(exc.headers or {}), **({"x-should-retry": "false"} if stay else {})}
        return Response(body, status=status, headers=headers or None)
    if isinstance(exc, Http404 | exceptions.NotFound):
        return Response(error_body(404, "Not found.", code="not_found"), status=404)
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    message = str(data["detail"]) if isinstance(data, dict) and "detail" in data else str(data)
    code = getattr(data.get("detail"), "code", None) if isinstance(data, dict) else None
    headers = {
        name: value
        for name, value in response.items()
        if name.lower() in ("www-authenticate", "allow", "retry-after")
    }
    body = error_body(response.status_code, message, code=str(code) if code else None)
    return Response(body, status=response.status_code, headers=headers or None)
