"""The Agent Protocol's error shape, for both URL sets: ``{"error", "message", "details"?}``
(docs/spec/agent-protocol-tasks.md, 错误响应). ``error`` is the status's reason phrase,
``message`` what went wrong; the official v1 clients read ``message``, so one body serves
both. Every API view of the package renders its errors here (``AgentProtocolApi``)."""

import json
from http import HTTPStatus
from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agent_runs.errors import DomainError


class BodyInvalid(DomainError):
    """A request body that does not hold what the route takes; ``details`` names each
    problem. The spec set answers 400, the official set 422 (its OpenAPI)."""

    code = "invalid_body"

    def __init__(self, message: str, *, status: int = 400, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


class TaskNotActive(DomainError):
    """Pause of a task with no run in progress."""

    code = "task_not_active"
    status = 409

    def __init__(self, status: str) -> None:
        super().__init__(f"the task is not running (it is {status})")


class TaskEnded(DomainError):
    """Cancel of a task whose run completed or failed."""

    code = "task_ended"
    status = 409

    def __init__(self, status: str) -> None:
        super().__init__(f"the task has already ended ({status})")


class NoStepLeft(DomainError):
    """An official-set step asked of a task whose work has ended, without an input to
    start more."""

    code = "no_step_left"
    status = 400

    def __init__(self) -> None:
        super().__init__("the task has no step left to execute: send an input to start a new one")


class ApprovalAwaited(DomainError):
    """A resume without an answer (or a cancel) of a task that waits on an approval: the
    answer is what lets it go on, or declines the call."""

    code = "approval_awaited"
    status = 409

    def __init__(self, interrupt_id: str) -> None:
        answer = json.dumps({"interruptId": interrupt_id, "approved": True})
        super().__init__(
            f"the task waits for an approval: answer it with additional_input {answer} "
            '("approved": false declines the call)'
        )
        self.interrupt_id = interrupt_id


class StepNotStarted(DomainError):
    """An official-set step whose run has not started a stage within the step wait: every
    worker is busy. Nothing is lost: the run stays queued and a later step finds it."""

    code = "step_not_started"
    status = 503

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the task's run has not started within {seconds:g} s (every worker is busy): "
            "execute the step again later"
        )


def error_answer(exc: DomainError) -> tuple[int, dict[str, Any]]:
    """The status and body of a domain error in the protocol's shape."""
    return exc.status, error_body(exc.status, str(exc), getattr(exc, "details", None))


def error_body(status: int, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": HTTPStatus(status).phrase, "message": message}
    if details is not None:
        body["details"] = details
    return body


def render(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The error response for ``exc`` in the protocol's shape (``None``: a server error,
    left to Django)."""
    details: Any = None
    headers: dict[str, str] = {}
    if isinstance(exc, DomainError):
        status, body = error_answer(exc)
        return Response(body, status=status, headers=exc.headers)
    if isinstance(exc, Http404 | exceptions.NotFound):
        view = context.get("view")
        status, message = 404, getattr(view, "not_found", "not found")
    else:
        response = exception_handler(exc, context)
        if response is None:
            return None
        status, headers = response.status_code, dict(response.items())
        message, details = _message(response.data)
    return Response(error_body(status, message, details), status=status, headers=headers or None)


def _message(data: Any) -> tuple[str, Any]:
    """DRF's error data as a message, with its field errors as details."""
    if isinstance(data, dict) and set(data) == {"detail"}:
        return str(data["detail"]), None
    if isinstance(data, dict):
        return "invalid request", data
    if isinstance(data, list):
        return "; ".join(str(item) for item in data), None
    return str(data), None
