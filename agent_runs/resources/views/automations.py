"""The caller's automation jobs over REST (docs/automations.md, REST): list and create
(``/api/v1/agent/automations``), read, change and delete one (``…/{id}``), run it now
(``…/{id}/run``) and page through its runs (``…/{id}/runs``). Another user's job is a 404."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.agent_config import system_agents
from agent_runs.api.authentication import request_user
from agent_runs.api.json_input import NOT_BLANK_PATTERN, JsonBodyParser
from agent_runs.api.openapi import error_responses
from agent_runs.errors import AutomationJobInvalid
from agent_runs.models import AutomationJob, MultitaskStrategy, Run, Stage
from agent_runs.resources.inbound import (
    RUN_CURSOR,
    parse_page_query,
    run_cursor,
    run_position,
)
from agent_runs.resources.openapi import page_parameters
from agent_runs.resources.outbound import RunPageSerializer, RunSerializer
from agent_runs.run_input import iana_timezones
from agent_runs.selectors.automations import (
    automation_job_get_for_user,
    automation_job_runs,
    automation_jobs_of_user,
)
from agent_runs.selectors.threads import RunPosition, runs_page, with_error_code
from agent_runs.services.automations import (
    automation_job_create,
    automation_job_delete,
    automation_job_run,
    automation_job_update,
)

JOB_ID = OpenApiParameter(
    "job_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The job's `id`."
)
_MULTITASK_HELP = (
    "What a due time does while the job's previous run is still queued, running or paused: "
    "`reject` skips it (the job's `lastOutcome` says why; `POST …/run` answers 409); "
    "`enqueue` (default) queues the new run (behind the previous one on a `same` thread); "
    "`interrupt` and `rollback` cancel the run holding a `same` thread's turn, as a new "
    "message with that strategy does (docs/protocols/multitask.md)."
)


class AutomationJobSerializer(serializers.Serializer):
    """An automation job, as its owner reads it."""

    id = serializers.IntegerField()
    name = serializers.SlugField(help_text="What its runs name (`automation_job`); fixed.")
    description = serializers.CharField()
    schedule = serializers.CharField(
        help_text="5 cron fields (minute hour day month weekday); empty: run by hand only."
    )
    timezone = serializers.CharField(help_text="The IANA timezone the schedule is read in.")
    prompt = serializers.CharField(help_text="The user message each run sends.")
    threadPolicy = serializers.ChoiceField(
        source="thread_policy", choices=AutomationJob.ThreadPolicy.choices
    )
    enabled = serializers.BooleanField()
    catchUp = serializers.ChoiceField(source="catch_up", choices=AutomationJob.CatchUp.choices)
    multitask = serializers.ChoiceField(
        choices=MultitaskStrategy.choices, help_text=_MULTITASK_HELP
    )
    config = serializers.JSONField(
        help_text='Its runs\' tools and context: `{"enabled_tools": [...], "context": "..."}`, '
        "for every stage or per stage under its name."
    )
    threadId = serializers.UUIDField(
        source="thread_id", allow_null=True, help_text="The thread of a `same`-thread job."
    )
    nextRunAt = serializers.DateTimeField(
        source="next_run_at", allow_null=True, help_text="The next due time; null: none."
    )
    lastRunId = serializers.CharField(source="last_run.run_id", allow_null=True, default=None)
    lastOutcome = serializers.CharField(
        source="last_outcome", help_text="What the last due time did: its run, or why none."
    )
    lastOutcomeAt = serializers.DateTimeField(source="last_outcome_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")


class AutomationJobListSerializer(serializers.Serializer):
    automations = AutomationJobSerializer(many=True)


# A 5-field cron expression (``agent_runs/schedules.py``), or "" for none.
CRON_FORMAT = "cron-expression"


def _stage_schema() -> dict[str, Any]:
    """A stage's tools and context, as ``agent_config.StageConfig`` reads them."""
    known = system_agents().known_tools
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "enabled_tools": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"enum": known},
                        {
                            "type": "object",
                            "required": ["name"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"enum": known},
                                "requires_approval": {"type": ["boolean", "null"]},
                            },
                        },
                    ]
                },
            },
            "context": {"type": "string"},
        },
    }


def automation_job_request_schema(*, partial: bool) -> dict[str, Any]:
    """The JSON Schema of a job's body (``POST``: ``name`` and ``prompt`` required;
    ``PATCH``: any field but ``name``), as far as JSON Schema states the rules: the schedule
    is a ``cron-expression`` (5 fields that fire some time, or empty)."""
    stage = _stage_schema()
    properties: dict[str, Any] = {
        "name": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "maxLength": 100},
        "description": {"type": "string"},
        "schedule": {
            "type": "string",
            "format": CRON_FORMAT,
            "maxLength": 120,
            "description": "5 cron fields (minute hour day month weekday), in `timezone`; "
            "empty: run by hand only.",
        },
        "timezone": {"enum": sorted(iana_timezones())},
        "prompt": {"type": "string", "maxLength": 20_000, "pattern": NOT_BLANK_PATTERN},
        "threadPolicy": {"enum": AutomationJob.ThreadPolicy.values},
        "enabled": {"type": "boolean"},
        "catchUp": {"enum": AutomationJob.CatchUp.values},
        "multitask": {"enum": MultitaskStrategy.values, "description": _MULTITASK_HELP},
        "config": {
            "description": 'Its runs\' tools and context: `{"enabled_tools": [...], "context": '
            '"..."}` for every stage, or per stage under its name (`router` and `worker`, '
            "and `memory` to run the memory stage).",
            "anyOf": [
                stage,
                {
                    "type": "object",
                    "required": ["router", "worker"],
                    "additionalProperties": False,
                    "properties": {name: stage for name in Stage.values},
                },
            ],
        },
    }
    if partial:
        del properties["name"]
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if not partial:
        schema["required"] = ["name", "prompt"]
    return schema


class AutomationJobInputSerializer(serializers.Serializer):
    """A job to create (``name`` and ``prompt`` required), or the fields to change."""

    name = serializers.SlugField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True)
    schedule = serializers.CharField(required=False, allow_blank=True, max_length=120)
    timezone = serializers.CharField(required=False, max_length=64)
    prompt = serializers.CharField(max_length=20_000)
    threadPolicy = serializers.ChoiceField(
        source="thread_policy", required=False, choices=AutomationJob.ThreadPolicy.choices
    )
    enabled = serializers.BooleanField(required=False)
    catchUp = serializers.ChoiceField(
        source="catch_up", required=False, choices=AutomationJob.CatchUp.choices
    )
    multitask = serializers.ChoiceField(
        required=False, choices=MultitaskStrategy.choices, help_text=_MULTITASK_HELP
    )
    config = serializers.JSONField(required=False)


def _job_fields(request: Request, *, partial: bool) -> dict[str, Any]:
    """The body's fields, as the model names them; the first invalid one is a 422 naming
    it (an unknown one too; ``name`` is unknown to a change)."""
    body = request.data
    if not isinstance(body, dict):
        raise AutomationJobInvalid("body", "a JSON object")
    fields: list[str] = list(AutomationJobInputSerializer().fields)
    known = [name for name in fields if not partial or name != "name"]
    for name in body:
        if name not in known:
            raise AutomationJobInvalid(str(name), f"unknown field; known: {', '.join(known)}")
    serializer = AutomationJobInputSerializer(data=body, partial=partial)
    if not serializer.is_valid():
        field, problems = next(iter(serializer.errors.items()))
        raise AutomationJobInvalid(field, str(problems[0]))
    return dict(serializer.validated_data)


def _job_out(job: AutomationJob) -> dict[str, Any]:
    return dict(AutomationJobSerializer(job).data)


class AutomationJobListApi(APIView):
    """``GET /api/v1/agent/automations``: the caller's jobs; ``POST``: a new one."""

    parser_classes = [JsonBodyParser]

    @extend_schema(
        operation_id="automations_list",
        summary="The caller's automation jobs",
        tags=["automations"],
        responses={200: AutomationJobListSerializer, **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        jobs = automation_jobs_of_user(user=request_user(request)).select_related("last_run")
        return Response(AutomationJobListSerializer({"automations": jobs}).data)

    @extend_schema(
        operation_id="automations_create",
        summary="Create an automation job",
        description="Its first due time is computed at once (`nextRunAt`). An invalid cron "
        "expression, timezone or any other field is a 422 whose `detail` names the field.",
        tags=["automations"],
        request={"application/json": automation_job_request_schema(partial=False)},
        responses={
            201: AutomationJobSerializer,
            **error_responses(400, 401, 409, 422, e409="The caller has a job of this name already"),
        },
    )
    def post(self, request: Request) -> Response:
        fields = _job_fields(request, partial=False)
        job = automation_job_create(owner=request_user(request), **fields)
        return Response(_job_out(job), status=status.HTTP_201_CREATED)


class AutomationJobDetailApi(APIView):
    """``GET``, ``PATCH`` and ``DELETE /api/v1/agent/automations/{id}``."""

    parser_classes = [JsonBodyParser]

    @extend_schema(
        operation_id="automations_retrieve",
        parameters=[JOB_ID],
        summary="An automation job",
        tags=["automations"],
        responses={200: AutomationJobSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = automation_job_get_for_user(user=request_user(request), job_id=job_id)
        return Response(_job_out(job))

    @extend_schema(
        operation_id="automations_partial_update",
        parameters=[JOB_ID],
        summary="Change an automation job",
        description="Only the fields given change; its `name` cannot. A new schedule, timezone "
        "or `enabled` computes the next due time from now.",
        tags=["automations"],
        request={"application/json": automation_job_request_schema(partial=True)},
        responses={200: AutomationJobSerializer, **error_responses(400, 401, 404, 422)},
    )
    def patch(self, request: Request, job_id: str) -> Response:
        job = automation_job_get_for_user(user=request_user(request), job_id=job_id)
        job = automation_job_update(job=job, **_job_fields(request, partial=True))
        return Response(_job_out(job))

    @extend_schema(
        operation_id="automations_destroy",
        parameters=[JOB_ID],
        summary="Delete an automation job",
        description="Its runs stay.",
        tags=["automations"],
        responses={204: None, **error_responses(401, 404)},
    )
    def delete(self, request: Request, job_id: str) -> Response:
        job = automation_job_get_for_user(user=request_user(request), job_id=job_id)
        automation_job_delete(job=job)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AutomationJobRunApi(APIView):
    """``POST /api/v1/agent/automations/{id}/run``: run the job now."""

    @extend_schema(
        operation_id="automations_run",
        parameters=[JOB_ID],
        summary="Run an automation job now",
        description="An ordinary `automation` run of the caller's, with the job's prompt, "
        "queued at once; the job's schedule is unchanged. Follow it as any run "
        "(`GET /api/v1/agent/runs/{threadId}/events`).",
        tags=["automations"],
        request=None,
        responses={
            202: RunSerializer,
            **error_responses(
                401,
                404,
                409,
                422,
                e409="`multitask: reject` and its previous run is still going",
                e422="The job has no prompt",
            ),
        },
    )
    def post(self, request: Request, job_id: str) -> Response:
        job = automation_job_get_for_user(user=request_user(request), job_id=job_id)
        run = automation_job_run(job=job)
        run = with_error_code(Run.objects.filter(pk=run.pk)).get()
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class AutomationJobRunListApi(APIView):
    """``GET /api/v1/agent/automations/{id}/runs?limit=&cursor=``: the job's runs, newest
    first."""

    @extend_schema(
        operation_id="automations_runs_list",
        summary="An automation job's runs",
        description="Newest first: those its schedule made, those run by hand, and those a "
        "client started naming the job. Keyset pages.",
        tags=["automations"],
        parameters=[JOB_ID, *page_parameters(RUN_CURSOR)],
        responses={
            200: RunPageSerializer,
            **error_responses(400, 401, 404, e400="A limit or cursor this API cannot read"),
        },
    )
    def get(self, request: Request, job_id: str) -> Response:
        query = parse_page_query(request.query_params)
        job = automation_job_get_for_user(user=request_user(request), job_id=job_id)
        page = runs_page(
            runs=automation_job_runs(job=job),
            after=run_position(query.cursor) if query.cursor else None,
            limit=query.limit,
        )
        last = page.items[-1] if page.has_more else None
        next_cursor = run_cursor(RunPosition(last.created_at, last.pk)) if last else None
        return Response(RunPageSerializer({"runs": page.items, "next": next_cursor}).data)
