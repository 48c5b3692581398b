"""The Agent Protocol's spec set under ``/api/`` (docs/spec/agent-protocol-tasks.md): tasks
(each a thread of the caller's, its work the core's runs), their control, steps and per-step
artifacts. Each view parses, makes one core call and answers in the spec's shapes; errors are
``{"error", "message", "details"?}`` (errors.py)."""

import uuid
from collections.abc import Callable
from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
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
from agent_runs.protocols.agent_protocol.openapi import UPLOAD_REQUEST
from agent_runs.protocols.agent_protocol.outbound import (
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
)
from agent_runs.protocols.agent_protocol.views.common import (
    AgentProtocolApi,
    UrlSet,
    approval_answered,
    artifact_file_response,
    step_of_task,
    steps_page,
    task_for_request,
    task_step_for_request,
    tasks_page,
    upload,
)
from agent_runs.selectors.steps import (
    artifact_get_of_thread,
    artifacts_of_thread,
    latest_run_of_thread,
    step_get_of_thread,
)
from agent_runs.services.artifacts import artifact_delete
from agent_runs.services.runs import RunOptions, run_create
from agent_runs.services.steps import client_step_create, client_step_update
from agent_runs.services.threads import thread_delete


def _download_url(request: Request) -> Callable[[Artifact], str]:
    """Where this set serves an artifact's file."""

    def url(artifact: Artifact) -> str:
        step = f"steps/{artifact.step_id}/" if artifact.step_id else ""
        return request.build_absolute_uri(
            f"/api/tasks/{artifact.thread_id}/{step}artifacts/{artifact.pk}/download"
        )

    return url


# Pages by ``page`` and ``pageSize`` (20); artifacts' URLs in steps; an unreadable body 400.
SPEC = UrlSet(
    tags=["agent protocol (spec)"],
    page_key="page",
    size_key="pageSize",
    default_size=20,
    pagination=spec_pagination,
    task=spec_task,
    step=lambda request, step: spec_task_step(step, _download_url(request)),
    invalid_status=400,
)


class TaskListApi(AgentProtocolApi):
    """``GET /api/tasks`` (a page of the caller's tasks, newest first) and ``POST
    /api/tasks`` (a task; the agent starts on it at once)."""

    @SPEC.schema("ap_tasks_list", "The caller's tasks", 400, 401, paged=True)
    def get(self, request: Request) -> Response:
        return tasks_page(request, SPEC)

    @SPEC.schema(
        "ap_tasks_create",
        "Create a task; the agent starts on it",
        400,
        401,
        413,
        request=SpecTaskCreate,
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

    @SPEC.schema("ap_tasks_get", "A task, with its cycles", 401, 404)
    def get(self, request: Request, task_id: str) -> Response:
        thread = task_for_request(request, task_id)
        return Response(spec_task_detail(thread, task_cycles(thread=thread)))

    @SPEC.schema("ap_tasks_delete", "Delete a task", 401, 404, ok={204: None})
    def delete(self, request: Request, task_id: str) -> Response:
        thread_delete(thread=task_for_request(request, task_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TaskPauseApi(AgentProtocolApi):
    """``POST /api/tasks/:id/pause``: a queued task parks at once, a running one at its next
    step boundary."""

    @SPEC.schema("ap_tasks_pause", "Pause a task", 401, 404, 409, request=None)
    def post(self, request: Request, task_id: str) -> Response:
        return _task_control(request, task_id, task_pause)


class TaskResumeApi(AgentProtocolApi):
    """``POST /api/tasks/:id/resume``: a paused task goes on; one that waits on an approval
    goes on with the answer its body gives (``additional_input: {interruptId, approved,
    arguments?, reason?}``)."""

    @SPEC.schema(
        "ap_tasks_resume",
        "Resume a task, or answer the approval it waits on",
        *(400, 401, 404, 409, 410, 422),
        request=OpenApiTypes.OBJECT,
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

    @SPEC.schema("ap_tasks_cancel", "Cancel a task", 401, 404, 409, request=None)
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

    @SPEC.schema("ap_steps_list", "A task's steps", 400, 401, 404, paged=True)
    def get(self, request: Request, task_id: str) -> Response:
        return steps_page(request, task_id, SPEC)

    @SPEC.schema(
        "ap_steps_create",
        "Record a step of a task",
        *(400, 401, 404, 409, 410, 422),
        ok={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT},
        request=OpenApiTypes.OBJECT,
    )
    def post(self, request: Request, task_id: str) -> Response:
        thread = task_for_request(request, task_id)
        answered = approval_answered(request, thread, SPEC)
        if answered is not None:
            return answered
        body = body_parse(SpecStepCreate, request.data)
        step = client_step_create(
            thread=thread, name=body.name, input=body.input, additional_input=body.additional_input
        )
        return Response(spec_step(step, _download_url(request)), status=status.HTTP_201_CREATED)


class StepDetailApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps/:stepId`` and ``PATCH`` (a client's step only)."""

    not_found = "step not found"

    @SPEC.schema("ap_steps_get", "A step", 401, 404)
    def get(self, request: Request, task_id: str, step_id: str) -> Response:
        return step_of_task(request, task_id, step_id, SPEC)

    @SPEC.schema(
        "ap_steps_update", "Update a client's step", 400, 401, 404, 409, request=OpenApiTypes.OBJECT
    )
    def patch(self, request: Request, task_id: str, step_id: str) -> Response:
        step = _step(request, task_id, step_id)
        body = body_parse(SpecStepUpdate, request.data)
        changes = {name: getattr(body, name) for name in body.model_fields_set}
        if changes.get("additional_output", {}) is None:
            del changes["additional_output"]
        step = client_step_update(step=step, changes=changes)
        step = step_get_of_thread(thread=step.thread, step_id=step.pk)
        return Response(spec_step(step, _download_url(request)))


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

    @SPEC.schema("ap_step_artifacts_list", "A step's artifacts", 400, 401, 404, paged=True)
    def get(self, request: Request, task_id: str, step_id: str) -> Response:
        step = task_step_for_request(request, task_id, step_id)
        if isinstance(step, Interrupt):  # an approval makes no files
            artifacts = Artifact.objects.none()
        else:
            artifacts = artifacts_of_thread(thread=step.thread, step=step)
        return SPEC.page(request, "artifacts", artifacts, lambda a: _artifact_shape(request, a))

    @SPEC.schema(
        "ap_step_artifacts_upload",
        "Upload an artifact of a step",
        *(400, 401, 404, 413),
        ok={201: OpenApiTypes.OBJECT},
        request=UPLOAD_REQUEST,
    )
    def post(self, request: Request, task_id: str, step_id: str) -> Response:
        step = _step(request, task_id, step_id)
        artifact = upload(request, thread=step.thread, step=step)
        return Response(_artifact_shape(request, artifact), status=status.HTTP_201_CREATED)


def _artifact_shape(request: Request, artifact: Artifact) -> dict[str, Any]:
    return spec_artifact(artifact, _download_url(request)(artifact))


class StepArtifactDetailApi(AgentProtocolApi):
    """``GET /api/tasks/:taskId/steps/:stepId/artifacts/:artifactId`` (its metadata) and
    ``DELETE`` (the row, then its stored file)."""

    not_found = "artifact not found"

    @SPEC.schema("ap_step_artifacts_get", "An artifact's metadata", 401, 404)
    def get(self, request: Request, task_id: str, step_id: str, artifact_id: str) -> Response:
        artifact = _artifact(request, task_id, step_id, artifact_id)
        return Response(_artifact_shape(request, artifact))

    @SPEC.schema("ap_step_artifacts_delete", "Delete an artifact", 401, 404, ok={204: None})
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

    @SPEC.schema(
        "ap_step_artifacts_download",
        "Download an artifact",
        401,
        404,
        # The artifact's own media type (an image/png answers image/png).
        ok={(200, "*/*"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, task_id: str, step_id: str, artifact_id: str) -> Any:
        artifact = _artifact(request, task_id, step_id, artifact_id)
        return artifact_file_response(artifact)
