"""The official Agent Protocol v1 under ``/ap/v1/agent/`` (AI-Engineer-Foundation's
``openapi.yml``), as its clients (``agent-protocol-client``, agbenchmark) speak it: POSTs
answer 200, a step's input and output are strings, artifacts belong to the task.

A task created with an input parks before its first stage; each ``POST …/steps`` lets it
run one more stage (a step) and answers that step once it has finished, or as it stands
after ``AGENT_PROTOCOL_STEP_WAIT_SECONDS`` (a 503 if no worker has started the run by
then). The wait follows the task's journal on the event loop: it holds no request thread.
Once the task's run has ended, a step with an ``input`` starts a new run of the task (its
next turn); one without is a 400.

A stage that stops on an approval is answered by the ``approval`` step (``created``, its
output asking for the answer). A step whose ``additional_input`` is ``{interruptId,
approved, arguments?, reason?}`` executes it: the answer, given by the core's rules, and
the approval step ``completed``; the run that goes on is parked before its first stage,
which the next step runs. A step without an answer meanwhile answers the approval step as
it stands."""

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import request_user
from agent_runs.api.awaited import Produce, awaited_response
from agent_runs.db import db_call
from agent_runs.errors import RunNotPaused
from agent_runs.events.reads import thread_last_event_id
from agent_runs.events.wait import run_events_wait
from agent_runs.models import RUN_ACTIVE_STATUSES, Interrupt, Run, Step, Thread, agent_step_id
from agent_runs.protocols.agent_protocol.errors import (
    NoStepLeft,
    StepNotStarted,
    error_answer,
)
from agent_runs.protocols.agent_protocol.inbound import (
    OfficialStepCreate,
    OfficialTaskCreate,
    body_parse,
    task_run_input,
    task_text_check,
    uuid_or_404,
)
from agent_runs.protocols.agent_protocol.openapi import UPLOAD_REQUEST
from agent_runs.protocols.agent_protocol.outbound import (
    v1_artifact,
    v1_pagination,
    v1_step,
    v1_task,
)
from agent_runs.protocols.agent_protocol.selectors import (
    approvals_of_run,
    pending_approval_of_run,
    task_get,
)
from agent_runs.protocols.agent_protocol.views.common import (
    AgentProtocolApi,
    UrlSet,
    approval_answered,
    artifact_file_response,
    step_of_task,
    steps_page,
    task_for_request,
    tasks_page,
    upload,
)
from agent_runs.run_input import multitask_parse
from agent_runs.selectors.steps import (
    artifact_get_of_thread,
    artifacts_of_thread,
    finished_step_ids_of_run,
    latest_run_of_thread,
    step_answering,
)
from agent_runs.services.lifecycle import run_resume
from agent_runs.services.run_request import run_step_budget
from agent_runs.services.runs import RunOptions, run_create
from agent_runs.services.threads import thread_create

# Pages by ``current_page`` and ``page_size`` (10); an unreadable body 422.
V1 = UrlSet(
    tags=["agent protocol (v1)"],
    page_key="current_page",
    size_key="page_size",
    default_size=10,
    pagination=v1_pagination,
    task=v1_task,
    step=lambda request, step: v1_step(step),
    invalid_status=422,
)


class TaskListApi(AgentProtocolApi):
    @V1.schema("ap_v1_tasks_list", "The caller's tasks", 400, 401, paged=True)
    def get(self, request: Request) -> Response:
        return tasks_page(request, V1)

    @V1.schema(
        "ap_v1_tasks_create",
        "Create a task (it runs a step at a time)",
        *(400, 401, 422),
        request=OfficialTaskCreate,
    )
    def post(self, request: Request) -> Response:
        body = body_parse(OfficialTaskCreate, request.data, status=422)
        metadata = {"additional_input": body.additional_input or {}}
        user = request_user(request)
        if body.input is None:
            thread = thread_create(user=user, metadata=metadata)
        else:
            text = task_text_check(body.input, field="input", status=422)
            run = run_create(
                user=user,
                run_input=task_run_input(thread_id=uuid.uuid4(), text=text),
                options=RunOptions(step_budget=0, answer_artifact=True, thread_metadata=metadata),
                protocol=Run.Protocol.AGENT_PROTOCOL,
            )
            thread = run.thread
        return Response(v1_task(task_get(user=user, thread_id=thread.pk)))


class TaskDetailApi(AgentProtocolApi):
    @V1.schema("ap_v1_tasks_get", "A task", 401, 404)
    def get(self, request: Request, task_id: str) -> Response:
        return Response(v1_task(task_for_request(request, task_id)))


class StepListApi(AgentProtocolApi):
    @V1.schema("ap_v1_steps_list", "A task's steps", 400, 401, 404, paged=True)
    def get(self, request: Request, task_id: str) -> Response:
        return steps_page(request, task_id, V1)

    @V1.schema(
        "ap_v1_steps_execute",
        "Execute the task's next step",
        *(400, 401, 404, 409, 410, 422, 503),
        request=OpenApiTypes.OBJECT,
    )
    def post(self, request: Request, task_id: str) -> HttpResponse:
        thread = task_for_request(request, task_id)
        body = body_parse(OfficialStepCreate, request.data, status=422)
        answered = approval_answered(request, thread, V1)
        if answered is not None:
            return answered
        multitask = multitask_parse(
            (body.additional_input or {}).get("multitask"),
            field="additional_input.multitask",
            status=422,
        )
        return awaited_response(
            request, step_execute(request, thread=thread, text=body.input, multitask=multitask)
        )


def step_execute(
    request: Request, *, thread: Thread, text: str | None, multitask: str | None = None
) -> Produce:
    """Let the task's run take one more stage (or start its next run with ``text``); the
    answer is that stage's step once it has finished, followed in the journal. A run that
    waits on an approval has no stage to run: its approval step is the answer, as it
    stands (with an ``input``, the new run is refused: the approval comes first).

    ``multitask`` (``additional_input.multitask``, docs/protocols/multitask.md): with an
    ``input``, a new run is made even while the task's run is active, as the strategy says
    (without one, the active run takes the step and the input is not used)."""
    # Read first: the run's next events (its terminal one too) come after it.
    after_id = thread_last_event_id(thread_id=thread.pk)
    run = latest_run_of_thread(thread=thread)
    waiting = None if text else pending_approval_of_run(run=run)
    if waiting is not None:
        body = v1_step(waiting)

        async def as_it_stands() -> tuple[int, Any]:
            return 200, body

        return as_it_stands
    new_run = bool(text and text.strip() and multitask)
    if new_run or run is None or run.status not in RUN_ACTIVE_STATUSES:
        if not text or not text.strip():
            raise NoStepLeft()
        run = run_create(
            user=request_user(request),
            run_input=task_run_input(thread_id=thread.pk, text=text),
            options=RunOptions(step_budget=1, answer_artifact=True),
            multitask=multitask,
            protocol=Run.Protocol.AGENT_PROTOCOL,
        )
        finished_before: set[uuid.UUID] = set()
    else:
        finished_before = finished_step_ids_of_run(run=run)
        if run_step_budget(run) is not None:
            try:
                run = run_resume(run=run, steps=1)
            except RunNotPaused:
                # It ended as we looked (its last stage had just finished): once more, as a
                # task whose run has ended.
                return step_execute(request, thread=thread, text=text, multitask=multitask)
    return _step_answer(run=run, after_id=after_id, finished_before=finished_before)


def _step_answer(*, run: Run, after_id: int, finished_before: set[uuid.UUID]) -> Produce:
    """The run's first step to finish that had not before; as it stands when the wait is
    over or the run has ended without one."""

    def step_finished(event: dict[str, Any]) -> bool:
        if event.get("type") != "STEP_FINISHED" or event.get("runId") != run.run_id:
            return False
        stage = str(event.get("stepName"))
        step_id = agent_step_id(thread_id=run.thread_id, run_id=run.run_id, stage=stage)
        return step_id not in finished_before

    async def answer() -> tuple[int, Any]:
        await run_events_wait(
            thread_id=run.thread_id,
            run_id=run.run_id,
            after_id=after_id,
            until=step_finished,
            timeout=settings.AGENT_PROTOCOL_STEP_WAIT_SECONDS,
        )
        return await db_call(_step_answer_read, run=run, finished_before=finished_before)

    return answer


def _step_answer_read(*, run: Run, finished_before: set[uuid.UUID]) -> tuple[int, Any]:
    step = step_answering(run=run, finished_before=finished_before)
    if step is not None and step.name == "worker" and step.status == Step.Status.COMPLETED:
        # A worker that stopped on approvals: the step that follows is the answer (the
        # first still open, else the first, answered meanwhile elsewhere).
        approvals = approvals_of_run(run=run)
        waiting = [item for item in approvals if item.status == Interrupt.Status.PENDING]
        if approvals:
            return 200, v1_step((waiting or approvals)[0])
    if step is not None:
        return 200, v1_step(step)
    run.refresh_from_db(fields=["status"])
    if run.status in RUN_ACTIVE_STATUSES:  # still queued when the wait was over
        return error_answer(StepNotStarted(settings.AGENT_PROTOCOL_STEP_WAIT_SECONDS))
    return error_answer(NoStepLeft())  # it ended before its first stage (cancelled queued)


class StepDetailApi(AgentProtocolApi):
    not_found = "step not found"

    @V1.schema("ap_v1_steps_get", "A step", 401, 404)
    def get(self, request: Request, task_id: str, step_id: str) -> Response:
        return step_of_task(request, task_id, step_id, V1)


class ArtifactListApi(AgentProtocolApi):
    parser_classes = [MultiPartParser]

    @V1.schema("ap_v1_artifacts_list", "A task's artifacts", 400, 401, 404, paged=True)
    def get(self, request: Request, task_id: str) -> Response:
        artifacts = artifacts_of_thread(thread=task_for_request(request, task_id))
        return V1.page(request, "artifacts", artifacts, v1_artifact)

    @V1.schema(
        "ap_v1_artifacts_upload",
        "Upload an artifact of a task",
        *(400, 401, 404, 413),
        request=UPLOAD_REQUEST,
    )
    def post(self, request: Request, task_id: str) -> Response:
        artifact = upload(request, thread=task_for_request(request, task_id), step=None)
        return Response(v1_artifact(artifact))


class ArtifactDownloadApi(AgentProtocolApi):
    not_found = "artifact not found"

    @V1.schema(
        "ap_v1_artifacts_download",
        "Download an artifact",
        401,
        404,
        ok={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, task_id: str, artifact_id: str) -> Any:
        thread = task_for_request(request, task_id)
        artifact = artifact_get_of_thread(thread=thread, artifact_id=uuid_or_404(artifact_id))
        return artifact_file_response(artifact, content_type="application/octet-stream")
