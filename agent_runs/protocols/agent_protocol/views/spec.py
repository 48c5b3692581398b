"""The Agent Protocol's spec set under ``/api/`` (docs/spec/agent-protocol-tasks.md): tasks
(each a thread of the caller's, its work the core's runs), their control, steps and per-step
artifacts. Each view parses, makes one core call and answers in the spec's shapes; errors are
``{"error", "message", "details"?}`` (errors.py)."""

import uuid
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import request_user
from agent_runs.errors import StepNotEditable
from agent_runs.models import Artifact, Interrupt, Run, Step
from agent_runs.protocols.agent_protocol.approvals import approval_answer
from agent_runs.protocols.agent_protocol.controls import (
    task_cancel,
    task_pause,
    task_resume,
    task_status,
)
from agent_runs.protocols.agent_protocol.inbound import (
    SpecStepCreate,
    SpecStepUpdate,
    SpecTaskCreate,
    approval_parse,
    body_parse,
    task_run_input,
    task_text_check,
    uuid_or_404,
)
from agent_runs.protocols.agent_protocol.openapi import (
    UPLOAD_REQUEST,
    error_responses,
    page_parameters,
)
from agent_runs.protocols.agent_protocol.outbound import (
    approval_step,
    spec_artifact,
    spec_pagination,
    spec_step,
    spec_task,
    spec_task_created,
    spec_task_detail,
    spec_task_step,
)
from agent_runs.protocols.agent_protocol.selectors import (
    task_cycles,
    task_steps_page,
    tasks_of,
)
from agent_runs.protocols.agent_protocol.views import (
    AgentProtocolApi,
    artifact_file_response,
    rows_page,
    spec_download_url,
    task_for_request,
    task_step_for_request,
    upload,
)
from agent_runs.selectors.steps import (
    NumberedPage,
    artifact_get_of_thread,
    artifacts_of_thread,
    latest_run_of_thread,
    step_get_of_thread,
)
from agent_runs.services.artifacts import artifact_delete
from agent_runs.services.runs import RunOptions, run_create
from agent_runs.services.steps import client_step_create, client_step_update
from agent_runs.services.threads import thread_delete

_TAGS = ["agent protocol (spec)"]
_PAGE = page_parameters(page_key="page", size_key="pageSize", default_size=20)


def _spec_page(
    request: Request,
    key: str,
    rows: QuerySet[Any] | Callable[[int, int], NumberedPage[Any]],
    render: Callable[[Any], Any],
) -> Response:
    """A page of ``rows`` as ``{<key>: [...], pagination}``, as ``page`` and ``pageSize``
    ask."""
    page = rows_page(request, rows, page_key="page", size_key="pageSize", default_size=20)
    return Response({key: [render(row) for row in page.items], "pagination": spec_pagination(page)})


class TaskListApi(AgentProtocolApi):
    """``GET /api/tasks`` (a page of the caller's tasks, newest first) and ``POST
    /api/tasks`` (a task; the agent starts on it at once)."""

    @extend_schema(
        operation_id="ap_tasks_list",
        summary="The caller's tasks",
        tags=_TAGS,
        parameters=_PAGE,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401)},
    )
    def get(self, request: Request) -> Response:
        tasks = tasks_of(user=request_user(request)).prefetch_related("artifacts")
        return _spec_page(request, "tasks", tasks, spec_task)

    @extend_schema(
        operation_id="ap_tasks_create",
        summary="Create a task; the agent starts on it",
        tags=_TAGS,
        request=SpecTaskCreate,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401, 413)},
    )
    def post(self, request: Request) -> Response:
        body = body_parse(SpecTaskCreate, request.data)
        text = task_text_check(body.task, field="task")
        run_input = task_run_input(thread_id=uuid.uuid4(), text=text)
        metadata = {} if body.workspace is None else {"workspace": body.workspace}
        run = run_create(
            user=request_user(request),
            run_input=run_input,
            options=RunOptions(answer_artifact=True, thread_metadata=metadata),
            protocol=Run.Protocol.AGENT_PROTOCOL,
        )
        return Response(spec_task_created(run.thread, text))


class TaskDetailApi(AgentProtocolApi):
    """``GET /api/tasks/:id`` (the task with its cycles) and ``DELETE`` (cancelled first,
    then removed with everything it holds)."""

    @extend_schema(
        operation_id="ap_tasks_get",
        summary="A task, with its cycles",
        tags=_TAGS,
        responses={200: OpenApiTypes.OBJECT, **error_responses(401, 404)},
    )
    def get(self, request: Request, task_id: str) -> Response:
        thread = task_for_request(request, task_id)
        return Response(spec_task_detail(thread, task_cycles(thread=thread)))

    @extend_schema(
        operation_id="ap_tasks_delete",
        summary="Delete a task",
        tags=_TAGS,
        responses={204: None, **error_responses(401, 404)},
    )
    def delete(self, request: Request, task_id: str) -> Response:
        thread_delete(thread=task_for_request(request, task_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


_CONTROL_SCHEMA: dict[str, Any] = {
    "tags": _TAGS,
    "request": None,
    "responses": {200: OpenApiTypes.OBJECT, **error_responses(401, 404, 409)},
}


class TaskPauseApi(AgentProtocolApi):
    """``POST /api/tasks/:id/pause``: a queued task parks at once, a running one at its next
    step boundary."""

    @extend_schema(operation_id="ap_tasks_pause", summary="Pause a task", **_CONTROL_SCHEMA)
    def post(self, request: Request, task_id: str) -> Response:
        return _task_control(request, task_id, task_pause)


class TaskResumeApi(AgentProtocolApi):
    """``POST /api/tasks/:id/resume``: a paused task goes on; one that waits on an approval
    goes on with the answer its body gives (``additional_input: {interruptId, approved,
    arguments?, reason?}``)."""

    @extend_schema(
        operation_id="ap_tasks_resume",
        summary="Resume a task, or answer the approval it waits on",
        tags=_TAGS,
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401, 404, 409, 410, 422)},
    )
    def post(self, request: Request, task_id: str) -> Response:
        answer = approval_parse(request.data)
        if answer is None:
            return _task_control(request, task_id, task_resume)
        thread = task_for_request(request, task_id)
        approval_answer(user=request_user(request), thread=thread, answer=answer)
        return _task_control(request, task_id, lambda run: run)


class TaskCancelApi(AgentProtocolApi):
    """``POST /api/tasks/:id/cancel``: cancelling again answers the same."""

    @extend_schema(operation_id="ap_tasks_cancel", summary="Cancel a task", **_CONTROL_SCHEMA)
    def post(self, request: Request, task_id: str) -> Response:
        return _task_control(request, task_id, task_cancel)


def _task_control(
    request: Request, task_id: str, act: Callable[[Run | None], Run | None]
) -> Response:
    """Act on the task's latest run; answer the task's status after."""
    thread = task_for_request(request, task_id)
    run = act(latest_run_of_thread(thread=thread))
    return Response({"task_id": str(thread.pk), "status": task_status(run)})


class StepListApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps`` (with the task's approvals among them) and ``POST``
    (a client's own step, nothing runs; or, when its ``additional_input`` names an
    ``interruptId``, the answer to that approval)."""

    not_found = "task not found"

    @extend_schema(
        operation_id="ap_steps_list",
        summary="A task's steps",
        tags=_TAGS,
        parameters=_PAGE,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401, 404)},
    )
    def get(self, request: Request, task_id: str) -> Response:
        thread = task_for_request(request, task_id)
        url = self._url(request)

        def page(number: int, size: int) -> NumberedPage[Any]:
            return task_steps_page(thread=thread, number=number, size=size)

        return _spec_page(request, "steps", page, lambda step: spec_task_step(step, url))

    @extend_schema(
        operation_id="ap_steps_create",
        summary="Record a step of a task",
        tags=_TAGS,
        request=OpenApiTypes.OBJECT,
        responses={
            200: OpenApiTypes.OBJECT,
            201: OpenApiTypes.OBJECT,
            **error_responses(400, 401, 404, 409, 410, 422),
        },
    )
    def post(self, request: Request, task_id: str) -> Response:
        thread = task_for_request(request, task_id)
        answer = approval_parse(request.data)
        if answer is not None:
            interrupt = approval_answer(user=request_user(request), thread=thread, answer=answer)
            return Response(approval_step(interrupt))
        body = body_parse(SpecStepCreate, request.data)
        step = client_step_create(
            thread=thread, name=body.name, input=body.input, additional_input=body.additional_input
        )
        return Response(spec_step(step, self._url(request)), status=status.HTTP_201_CREATED)

    @staticmethod
    def _url(request: Request) -> Any:
        return lambda artifact: spec_download_url(request, artifact)


class StepDetailApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps/:stepId`` and ``PATCH`` (a client's step only)."""

    not_found = "step not found"

    @extend_schema(
        operation_id="ap_steps_get",
        summary="A step",
        tags=_TAGS,
        responses={200: OpenApiTypes.OBJECT, **error_responses(401, 404)},
    )
    def get(self, request: Request, task_id: str, step_id: str) -> Response:
        step = task_step_for_request(request, task_id, step_id)
        return Response(spec_task_step(step, lambda a: spec_download_url(request, a)))

    @extend_schema(
        operation_id="ap_steps_update",
        summary="Update a client's step",
        tags=_TAGS,
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401, 404, 409)},
    )
    def patch(self, request: Request, task_id: str, step_id: str) -> Response:
        step = _step(request, task_id, step_id)
        body = body_parse(SpecStepUpdate, request.data)
        changes = {name: getattr(body, name) for name in body.model_fields_set}
        if changes.get("additional_output", {}) is None:
            del changes["additional_output"]
        step = client_step_update(step=step, changes=changes)
        step = step_get_of_thread(thread=step.thread, step_id=step.pk)
        return Response(spec_step(step, lambda a: spec_download_url(request, a)))


def _step(request: Request, task_id: str, step_id: str) -> Step:
    """A step with a row of its own (an approval is an agent's step: not editable)."""
    step = task_step_for_request(request, task_id, step_id)
    if isinstance(step, Interrupt):
        raise StepNotEditable()
    return step


class StepArtifactListApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps/:stepId/artifacts`` and ``POST`` (multipart upload,
    up to ``ARTIFACT_MAX_BYTES``)."""

    not_found = "step not found"
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="ap_step_artifacts_list",
        summary="A step's artifacts",
        tags=_TAGS,
        parameters=_PAGE,
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 401, 404)},
    )
    def get(self, request: Request, task_id: str, step_id: str) -> Response:
        step = task_step_for_request(request, task_id, step_id)
        if isinstance(step, Interrupt):  # an approval makes no files
            artifacts = Artifact.objects.none()
        else:
            artifacts = artifacts_of_thread(thread=step.thread, step=step)
        return _spec_page(
            request,
            "artifacts",
            artifacts,
            lambda a: spec_artifact(a, spec_download_url(request, a)),
        )

    @extend_schema(
        operation_id="ap_step_artifacts_upload",
        summary="Upload an artifact of a step",
        tags=_TAGS,
        request=UPLOAD_REQUEST,
        responses={201: OpenApiTypes.OBJECT, **error_responses(400, 401, 404, 413)},
    )
    def post(self, request: Request, task_id: str, step_id: str) -> Response:
        step = _step(request, task_id, step_id)
        artifact = upload(request, thread=step.thread, step=step)
        return Response(
            spec_artifact(artifact, spec_download_url(request, artifact)),
            status=status.HTTP_201_CREATED,
        )


class StepArtifactDetailApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps/:stepId/artifacts/:artifactId`` (its metadata) and
    ``DELETE`` (the row, then its stored file)."""

    not_found = "artifact not found"

    @extend_schema(
        operation_id="ap_step_artifacts_get",
        summary="An artifact's metadata",
        tags=_TAGS,
        responses={200: OpenApiTypes.OBJECT, **error_responses(401, 404)},
    )
    def get(self, request: Request, task_id: str, step_id: str, artifact_id: str) -> Response:
        artifact = _artifact(request, task_id, step_id, artifact_id)
        return Response(spec_artifact(artifact, spec_download_url(request, artifact)))

    @extend_schema(
        operation_id="ap_step_artifacts_delete",
        summary="Delete an artifact",
        tags=_TAGS,
        responses={204: None, **error_responses(401, 404)},
    )
    def delete(self, request: Request, task_id: str, step_id: str, artifact_id: str) -> Response:
        artifact_delete(artifact=_artifact(request, task_id, step_id, artifact_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


def _artifact(request: Request, task_id: str, step_id: str, artifact_id: str) -> Artifact:
    step = task_step_for_request(request, task_id, step_id)
    if isinstance(step, Interrupt):  # an approval has no files
        raise Http404
    return artifact_get_of_thread(
        thread=step.thread, step=step, artifact_id=uuid_or_404(artifact_id)
    )


class StepArtifactDownloadApi(AgentProtocolApi):
    """``GET …/artifacts/:artifactId/download``: the file, with its type, name and size."""

    not_found = "artifact not found"

    @extend_schema(
        operation_id="ap_step_artifacts_download",
        summary="Download an artifact",
        tags=_TAGS,
        responses={
            # The artifact's own media type (an image/png answers image/png).
            (200, "*/*"): OpenApiTypes.BINARY,
            **error_responses(401, 404),
        },
    )
    def get(self, request: Request, task_id: str, step_id: str, artifact_id: str) -> Any:
        artifact = _artifact(request, task_id, step_id, artifact_id)
        return artifact_file_response(artifact)
