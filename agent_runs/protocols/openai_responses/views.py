"""The OpenAI Responses API under ``/openai/v1/``: ``POST /responses``, ``GET
/responses/{id}`` (``?stream=true`` replays its events), ``POST /responses/{id}/cancel``.
docs/protocols/openai-responses.md.

A response is a run (its runId is the response id, ``resp_…``); ``conversation`` and
``previous_response_id`` name its thread. A response whose run stops on approvals ends
``incomplete`` with an ``mcp_approval_request`` item each; a response whose input is
``mcp_approval_response`` items answers them (docs/protocols/openai-responses.md,
Approvals). A streamed answer is the run's journal through the
pure translator (outbound/), from the run's first event; a non-streamed one waits on the
journal on the event loop (``agent_runs/api/awaited.py``) and answers the ``Response`` rebuilt
from the stored rows, like ``GET``."""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import request_user
from agent_runs.api.awaited import awaited_response, run_end_answer
from agent_runs.api.json_input import JsonBodyParser
from agent_runs.api.sse import sse_response
from agent_runs.api.views import ProtocolView
from agent_runs.errors import (
    InterruptClosed,
    InterruptExpired,
    InterruptNotFound,
    InterruptOpen,
    ResumeIncomplete,
    ResumePayloadInvalid,
    RunNotLatest,
    ThreadBusy,
)
from agent_runs.events.reads import (
    event_stream_start,
    thread_last_event_id,
)
from agent_runs.models import Run
from agent_runs.protocols.openai_responses.errors import (
    ApprovalPending,
    ApprovalRequestClosed,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    ApprovalResponsesMissing,
    ConversationBusy,
    ConversationNotFound,
    PreviousResponseNotLatest,
    ResponseNotFound,
    ResponsesError,
    render,
)
from agent_runs.protocols.openai_responses.inbound import (
    ResponseCreate,
    approvals_run_input,
    input_text,
    new_response_id,
    response_create_parse,
    response_request,
    response_run_input,
)
from agent_runs.protocols.openai_responses.openapi import error_responses
from agent_runs.protocols.openai_responses.outbound import (
    ResponseProjection,
)
from agent_runs.protocols.openai_responses.selectors import (
    answered_approvals,
    approval_answered_by,
    response_approval_ids,
    response_head,
    response_now,
)
from agent_runs.protocols.openai_responses.stream import response_events
from agent_runs.selectors.runs import run_get_for_user, session_thread_id
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.runs import RunOptions, TurnRule, run_create

_TAGS = ["openai responses"]


def _stream(run: Run, user: AbstractBaseUser, starting_after: int | None = None) -> Any:
    start = event_stream_start(user=user, thread_id=run.thread_id, after_id=None, run_id=run.run_id)
    projection = ResponseProjection(response_head(run), answered_approvals(run=run))
    events = response_events(
        run=run, projection=projection, start=start, starting_after=starting_after
    )
    return sse_response(events)


def _response_run(request: Request, response_id: str, *, param: str | None = None) -> Run:
    """The caller's response (run); anyone else's, or none, is a 404."""
    try:
        return run_get_for_user(user=request_user(request), run_id=response_id)
    except Http404:
        raise ResponseNotFound(response_id, param=param) from None


def _thread_of(request: Request, body: ResponseCreate) -> tuple[uuid.UUID, TurnRule | None]:
    """The thread the new response goes on (``previous_response_id``'s, ``conversation``'s,
    or a new one) and its rule of turns there: after ``previous_response_id`` that response must
    be the latest there, and no response of the conversation may be in progress. The rule is
    checked by ``run_create`` under the thread's row lock, so of two turns sent at once only
    one is accepted."""
    if body.previous_response_id is not None:
        previous = _response_run(request, body.previous_response_id, param="previous_response_id")
        return previous.thread_id, TurnRule(after_run_id=previous.run_id)
    conversation = body.conversation_id
    if conversation is None:
        return uuid.uuid4(), None
    return session_thread_id(user=request_user(request), session=conversation), TurnRule()


_CREATED = {
    (200, "application/json"): OpenApiResponse(
        OpenApiTypes.OBJECT, description="The Response (queued, for a background one)"
    ),
    (200, "text/event-stream"): OpenApiResponse(
        OpenApiTypes.STR, description="The response's events (stream: true)"
    ),
}


class ResponsesApi(ProtocolView):
    """The base of the package's API views: errors in OpenAI's shape."""

    error_renderer = staticmethod(render)


class ResponseCreateApi(ResponsesApi):
    parser_classes = [JsonBodyParser]

    @extend_schema(
        operation_id="openai_responses_create",
        summary="Create a response (a run of the agent)",
        tags=_TAGS,
        request=ResponseCreate,
        responses={**_CREATED, **error_responses(400, 401, 404, 409, 410, 415)},
    )
    def post(self, request: Request) -> HttpResponseBase:
        body = response_create_parse(request.data)
        user = request_user(request)
        if body.approvals:
            run, after_id = _approvals_answer(request, body)
        else:
            run, after_id = _turn_create(request, body)
        if body.stream:
            return _stream(run, user)
        if body.background:
            return Response(response_now(run))
        return awaited_response(
            request, run_end_answer(run=run, after_id=after_id, read=response_now)
        )


def _turn_create(request: Request, body: ResponseCreate) -> tuple[Run, int]:
    """The response's run for a new user message, and the thread's last event before it."""
    thread_id, turn = _thread_of(request, body)
    # Read first: the run's events (its terminal one too) come after it.
    after_id = thread_last_event_id(thread_id=thread_id)
    try:
        run = run_create(
            user=request_user(request),
            run_input=response_run_input(
                thread_id=thread_id, response_id=new_response_id(), text=input_text(body)
            ),
            options=RunOptions(
                request=response_request(body, previous_response_id=body.previous_response_id),
                turn=turn,
            ),
            multitask=body.multitask,
            protocol=Run.Protocol.OPENAI_RESPONSES,
        )
    except Http404:  # a conversation named by the UUID of someone else's thread
        raise ConversationNotFound(str(body.conversation_id)) from None
    except RunNotLatest:  # a fork, or another turn after it came first
        raise PreviousResponseNotLatest(str(body.previous_response_id)) from None
    except ThreadBusy:
        previous = body.previous_response_id is not None
        raise ConversationBusy("previous_response_id" if previous else "conversation") from None
    except InterruptOpen as exc:
        raise ApprovalPending(exc.interrupt_id) from None
    return run, after_id


def _approvals_answer(request: Request, body: ResponseCreate) -> tuple[Run, int]:
    """The response's run answering the approval requests of ``previous_response_id``, and
    the thread's last event before it. The requests must be that response's; whether they
    are open, and all answered, is checked by ``run_create`` under the thread's row lock
    (``turn_answers_check``), so of two answers at once, through any protocol, one wins.
    No rule of turns: an answer that comes second finds its requests closed, the conflict
    it is told, not a fork."""
    previous = _response_run(request, str(body.previous_response_id), param="previous_response_id")
    params = _approval_params(body, previous)
    after_id = thread_last_event_id(thread_id=previous.thread_id)
    try:
        run = run_create(
            user=request_user(request),
            run_input=approvals_run_input(
                thread_id=previous.thread_id,
                response_id=new_response_id(),
                approvals=body.approvals,
            ),
            options=RunOptions(
                request=response_request(body, previous_response_id=previous.run_id)
            ),
            protocol=Run.Protocol.OPENAI_RESPONSES,
        )
    except InterruptClosed as exc:
        raise ApprovalRequestClosed(
            exc.interrupt_id,
            state=exc.interrupt_status,
            answered_by=approval_answered_by(approval_request_id=exc.interrupt_id),
            param=params.get(exc.interrupt_id, "input"),
        ) from None
    except InterruptExpired as exc:
        param = params.get(exc.interrupt_id, "input")
        raise ApprovalRequestExpired(exc.interrupt_id, param=param) from None
    except InterruptNotFound as exc:
        raise ApprovalRequestNotFound(
            exc.interrupt_id, response_id=previous.run_id, param="input"
        ) from None
    except ResumeIncomplete as exc:
        raise ApprovalResponsesMissing(exc.missing) from None
    except ResumePayloadInvalid as exc:
        raise ResponsesError(str(exc), param="input", code="invalid_value") from None
    return run, after_id


def _approval_params(body: ResponseCreate, previous: Run) -> dict[str, str]:
    """Where each answered approval request is in the body (its ``param``), each checked to
    be one that ``previous`` asked."""
    asked = response_approval_ids(run=previous)
    params = {
        item.approval_request_id: f"input[{index}].approval_request_id"
        for index, item in enumerate(body.approvals)
    }
    for approval_request_id, param in params.items():
        if approval_request_id not in asked:
            raise ApprovalRequestNotFound(
                approval_request_id, response_id=previous.run_id, param=param
            )
    return params


class ResponseDetailApi(ResponsesApi):
    @extend_schema(
        operation_id="openai_responses_get",
        summary="A response; with stream=true, its events from the first",
        tags=_TAGS,
        parameters=[
            OpenApiParameter("stream", bool, description="Answer the response's events (SSE)."),
            OpenApiParameter(
                "starting_after",
                int,
                description="With stream: only the events whose sequence_number is greater.",
            ),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
            (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR),
            **error_responses(400, 401, 404),
        },
    )
    def get(self, request: Request, response_id: str) -> HttpResponseBase:
        run = _response_run(request, response_id)
        stream = request.query_params.get("stream", "false").lower()
        if stream not in ("true", "false"):
            raise ResponsesError("'stream' must be true or false.", param="stream")
        if stream == "false":
            return Response(response_now(run))
        return _stream(run, request_user(request), _starting_after(request))


def _starting_after(request: Request) -> int | None:
    value = request.query_params.get("starting_after")
    if value is None:
        return None
    if not (value.isascii() and value.lstrip("-").isdigit() and len(value) <= 10):
        raise ResponsesError("'starting_after' must be an integer.", param="starting_after")
    return int(value)


class ResponseCancelApi(ResponsesApi):
    @extend_schema(
        operation_id="openai_responses_cancel",
        summary="Cancel a response (again: its final object)",
        tags=_TAGS,
        request=None,
        responses={200: OpenApiTypes.OBJECT, **error_responses(401, 404)},
    )
    def post(self, request: Request, response_id: str) -> Response:
        run = run_cancel(run=_response_run(request, response_id))
        return Response(response_now(run))
