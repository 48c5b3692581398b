"""The AgentScope Agent API (docs/protocols/agent-api.md): ``POST /api/v1/agent/process`` runs
an ``AgentRequest`` as a run of the session's thread, answered with its stream of objects
(``stream: true``, the default) or its final response object; ``GET …/process/{response_id}``
answers a response (or replays its stream) and ``POST …/{response_id}/cancel`` cancels it.

A request is checked whole before anything is stored or streamed: a bad one is a 4xx JSON
error in the protocol's shape (errors.py), never a 200 with an error frame."""

import uuid
from collections.abc import Iterable
from typing import Any, cast

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import request_user
from agent_runs.api.awaited import awaited_response, run_end_answer
from agent_runs.api.sse import sse_response
from agent_runs.api.views import ProtocolView
from agent_runs.events.reads import event_stream_start, thread_last_event_id
from agent_runs.models import Run
from agent_runs.protocols.agent_api.errors import BodyInvalid, render
from agent_runs.protocols.agent_api.inbound import (
    JsonBodyParser,
    agent_request_parse,
    request_run_input,
)
from agent_runs.protocols.agent_api.openapi import (
    AGENT_REQUEST,
    RESPONSE_OBJECT,
    STREAM_RESPONSE,
    error_responses,
)
from agent_runs.protocols.agent_api.selectors import (
    response_facts,
    response_object,
    run_request_kept,
)
from agent_runs.protocols.agent_api.stream import response_stream
from agent_runs.selectors.runs import run_get_for_user, session_thread_id
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.runs import RunOptions, run_create

_TAGS = ["agent api"]


class _JsonAlways(DefaultContentNegotiation):
    """Answers are JSON or the stream whatever the client accepts: the body's ``stream``
    decides, and agentscope clients send ``Accept: text/event-stream`` either way."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        return JSONRenderer(), JSONRenderer.media_type


class AgentApi(ProtocolView):
    """The base of the package's views: errors in the protocol's shape, as JSON whatever the
    client accepts, and what a 404 says (``not_found``)."""

    error_renderer = staticmethod(render)
    errors_as_json = True
    not_found = "response not found"


class _Api(AgentApi):
    parser_classes = [JsonBodyParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonAlways


def _stream_of(request: Request, run: Run, *, after: int | None) -> StreamingHttpResponse:
    start = event_stream_start(
        user=request_user(request), thread_id=run.thread_id, after_id=None, run_id=run.run_id
    )
    facts = response_facts(run=run)
    return sse_response(response_stream(run=run, facts=facts, start=start, after=after))


def _last_event_id(request: Request) -> int | None:
    """The client's ``Last-Event-ID``: the last sequence_number it has."""
    value = request.headers.get("Last-Event-ID")
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        raise BodyInvalid("Last-Event-ID must be a sequence_number (an integer from 0)")
    return int(value)


class ProcessApi(_Api):
    not_found = "session not found"

    @extend_schema(
        operation_id="agent_api_process",
        summary="Run an AgentRequest",
        description="The new user message of `session_id`'s conversation, run as a response "
        "`response_<uuid>`: with `stream: true` (the default) its objects as server-sent "
        "events, `id:` their sequence_number; with `stream: false` its final response object.",
        tags=_TAGS,
        request=AGENT_REQUEST,
        responses={
            (200, "application/json"): RESPONSE_OBJECT,
            (200, "text/event-stream"): STREAM_RESPONSE,
            **error_responses(400, 401, 404, 409, 415, 422),
        },
    )
    def post(self, request: Request) -> HttpResponseBase:
        body = agent_request_parse(request.data)
        user = request_user(request)
        session = body.session_id or str(uuid.uuid4())
        thread_id = session_thread_id(user=user, session=session)
        after_id = thread_last_event_id(thread_id=thread_id)  # the run's events come later
        run = run_create(
            user=user,
            run_input=request_run_input(request=body, thread_id=thread_id),
            options=RunOptions(request=run_request_kept(session_id=session, kept=body.kept())),
            multitask=body.multitask,
            protocol=Run.Protocol.AGENT_API,
        )
        if body.stream:
            return _stream_of(request, run, after=None)
        answer = run_end_answer(
            run=run, after_id=after_id, read=lambda run: response_object(run=run)
        )
        return awaited_response(cast(HttpRequest, request), answer)


class ResponseApi(_Api):
    @extend_schema(
        operation_id="agent_api_response_get",
        summary="A response, or its stream",
        description="The response's latest object (its final one once the run has ended); "
        "with `?stream=true` its stream replayed from sequence 0, or after `Last-Event-ID`, "
        "and followed live to its end.",
        tags=_TAGS,
        parameters=[
            OpenApiParameter("stream", bool, description="Replay and follow the stream."),
            OpenApiParameter(
                "Last-Event-ID",
                str,
                OpenApiParameter.HEADER,
                description="With `stream=true`: the last sequence_number the client has.",
            ),
        ],
        responses={
            (200, "application/json"): RESPONSE_OBJECT,
            (200, "text/event-stream"): STREAM_RESPONSE,
            **error_responses(400, 401, 404, 409),
        },
    )
    def get(self, request: Request, response_id: str) -> HttpResponseBase:
        stream = request.query_params.get("stream", "false").lower()
        if stream not in ("true", "false"):
            raise BodyInvalid("stream must be true or false")
        run = run_get_for_user(user=request_user(request), run_id=response_id)
        if stream == "true":
            return _stream_of(request, run, after=_last_event_id(request))
        return Response(response_object(run=run))


class ResponseCancelApi(_Api):
    @extend_schema(
        operation_id="agent_api_response_cancel",
        summary="Cancel a response",
        description="Stops the run (a model call in flight too) and answers its final response "
        "object, `canceled`; a response that has ended is answered as it ended.",
        tags=_TAGS,
        request=None,
        responses={
            (200, "application/json"): RESPONSE_OBJECT,
            **error_responses(401, 404, 409),
        },
    )
    def post(self, request: Request, response_id: str) -> HttpResponse:
        run = run_get_for_user(user=request_user(request), run_id=response_id)
        return Response(response_object(run=run_cancel(run=run)))
