"""What the Agent Protocol's two URL sets (spec.py, v1.py) share: their base view (errors in
the protocol's shape, errors.py), what each says its own way (``UrlSet``: its page query, its
task and step shapes, the status of a body it cannot read, its schema's tags), the views'
bodies both sets answer alike (a page of tasks or steps, a step, an approval's answer), the
caller's task, an artifact's upload and its file."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs import ports
from agent_runs.api.authentication import request_user
from agent_runs.api.json_input import JsonBodyParser
from agent_runs.api.views import ProtocolView
from agent_runs.models import Artifact, Step, Thread
from agent_runs.protocols.agent_protocol.approvals import approval_answer
from agent_runs.protocols.agent_protocol.errors import BodyInvalid, render
from agent_runs.protocols.agent_protocol.inbound import approval_parse, page_query, uuid_or_404
from agent_runs.protocols.agent_protocol.openapi import error_responses, page_parameters
from agent_runs.protocols.agent_protocol.selectors import (
    TaskStep,
    task_get,
    task_step_get,
    task_steps_page,
    tasks_of,
)
from agent_runs.selectors.steps import NumberedPage, numbered_page
from agent_runs.services.artifacts import artifact_upload

__all__ = [
    "AgentProtocolApi",
    "UrlSet",
    "approval_answered",
    "artifact_file_response",
    "step_of_task",
    "steps_page",
    "task_for_request",
    "task_step_for_request",
    "tasks_page",
    "upload",
]


class AgentProtocolApi(ProtocolView):
    """The base of the package's API views: JSON bodies, errors in the protocol's shape, and
    what a 404 says (``not_found``)."""

    error_renderer = staticmethod(render)
    parser_classes = [JsonBodyParser]
    not_found = "task not found"


def task_for_request(request: Request, task_id: str) -> Thread:
    """The caller's task ``task_id`` names, annotated for its status (a 404 otherwise)."""
    return task_get(user=request_user(request), thread_id=uuid_or_404(task_id))


def upload(request: Request, *, thread: Thread, step: Step | None) -> Artifact:
    """The multipart upload of a request (``file``, ``relative_path``) as an artifact."""
    file = request.FILES.get("file")
    if file is None:
        raise BodyInvalid("invalid body: file: a file is required (multipart/form-data)")
    relative_path = request.POST.get("relative_path") or ""
    if not isinstance(relative_path, str):
        raise BodyInvalid("invalid body: relative_path: must be text")
    return artifact_upload(thread=thread, step=step, file=file, relative_path=relative_path)


def artifact_file_response(artifact: Artifact, *, content_type: str | None = None) -> FileResponse:
    """The stored file, streamed: ``Content-Type``, ``Content-Disposition: attachment`` with
    its name, ``Content-Length``."""
    response = FileResponse(
        ports.attachments().object_open(name=artifact.storage_name),
        as_attachment=True,
        filename=artifact.file_name,
        content_type=content_type or artifact.mime_type,
    )
    response["Content-Length"] = str(artifact.size_bytes)
    return response


@dataclass(frozen=True)
class UrlSet:
    """What a URL set says its own way in what the two share: its lists' page query
    (``page_key``, ``size_key``, ``default_size``) and pagination object, its task and step
    shapes (a step's with the request, for its files' URLs), the status of a body it cannot
    read, and its operations' tags."""

    tags: list[str]
    page_key: str
    size_key: str
    default_size: int
    pagination: Callable[[NumberedPage[Any]], Any]
    task: Callable[[Thread], Any]
    step: Callable[[Request, TaskStep], Any]
    invalid_status: int

    @property
    def page_parameters(self) -> list[OpenApiParameter]:
        return page_parameters(
            page_key=self.page_key, size_key=self.size_key, default_size=self.default_size
        )

    def schema(
        self,
        operation_id: str,
        summary: str,
        *errors: int,
        ok: dict[Any, Any] | None = None,
        paged: bool = False,
        **more: Any,
    ) -> Any:
        """An operation's OpenAPI description: its answer (``ok``: a JSON object with 200
        unless said) and its errors' statuses, its page query if ``paged``, the set's
        tags; ``more`` as ``extend_schema`` takes it (``request``…)."""
        if paged:
            more["parameters"] = self.page_parameters
        ok = {200: OpenApiTypes.OBJECT} if ok is None else ok
        return extend_schema(
            operation_id=operation_id,
            summary=summary,
            tags=self.tags,
            responses={**ok, **error_responses(*errors)},
            **more,
        )

    def page(
        self,
        request: Request,
        key: str,
        rows: QuerySet[Any] | Callable[[int, int], NumberedPage[Any]],
        render: Callable[[Any], Any],
    ) -> Response:
        """The page of ``rows`` (a query, or what reads a page by number and size) the
        request asks for, as ``{<key>: [...], "pagination": ...}``."""
        number, size = page_query(
            request.query_params,
            page_key=self.page_key,
            size_key=self.size_key,
            default_size=self.default_size,
        )
        if isinstance(rows, QuerySet):
            page = numbered_page(rows, number=number, size=size)
        else:
            page = rows(number, size)
        return Response(
            {key: [render(row) for row in page.items], "pagination": self.pagination(page)}
        )


def tasks_page(request: Request, url_set: UrlSet) -> Response:
    """``GET tasks``: a page of the caller's tasks, newest first."""
    tasks = tasks_of(user=request_user(request)).prefetch_related("artifacts")
    return url_set.page(request, "tasks", tasks, url_set.task)


def steps_page(request: Request, task_id: str, url_set: UrlSet) -> Response:
    """``GET tasks/:taskId/steps``: a page of the task's steps, its approvals among them."""
    thread = task_for_request(request, task_id)

    def page(number: int, size: int) -> NumberedPage[Any]:
        return task_steps_page(thread=thread, number=number, size=size)

    return url_set.page(request, "steps", page, lambda step: url_set.step(request, step))


def step_of_task(request: Request, task_id: str, step_id: str, url_set: UrlSet) -> Response:
    """``GET tasks/:taskId/steps/:stepId``: the step (an approval, or a row of its own)."""
    return Response(url_set.step(request, task_step_for_request(request, task_id, step_id)))


def approval_answered(request: Request, thread: Thread, url_set: UrlSet) -> Response | None:
    """A step's body that answers one of the task's approvals (``additional_input:
    {interruptId, approved, arguments?, reason?}``): the answer given, and the approval
    step answered; ``None`` for any other body."""
    answer = approval_parse(request.data, status=url_set.invalid_status)
    if answer is None:
        return None
    interrupt = approval_answer(user=request_user(request), thread=thread, answer=answer)
    return Response(url_set.step(request, interrupt))


def task_step_for_request(request: Request, task_id: str, step_id: str) -> TaskStep:
    """The step ``step_id`` names of the caller's task (an approval, or a row of its own)."""
    thread = task_for_request(request, task_id)
    return task_step_get(thread=thread, step_id=uuid_or_404(step_id))
