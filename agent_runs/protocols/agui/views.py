import uuid
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponseBase
from rest_framework import status
from rest_framework.exceptions import NotAcceptable, ParseError, UnsupportedMediaType
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.api.authentication import stream_token_issue
from agent_runs.api.ids import thread_id_or_404
from agent_runs.api.json_input import MalformedJson
from agent_runs.api.sse import sse_response
from agent_runs.errors import OnDisconnectInvalid, RunPayloadTooLarge
from agent_runs.events.reads import event_stream_start
from agent_runs.models import Run
from agent_runs.protocols.agui.capabilities import agent_capabilities
from agent_runs.protocols.agui.inbound import (
    CONVERSATION_MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_BYTES,
    ConversationTurn,
    decode_json_body,
    parse_conversation_turn,
    parse_run_agent_input,
)
from agent_runs.protocols.agui.outbound import ClientEvents
from agent_runs.protocols.agui.schemas import task_accepted_response
from agent_runs.protocols.agui.stream import run_event_stream
from agent_runs.run_input import multitask_parse
from agent_runs.selectors.runs import run_get_for_user, thread_get_for_user
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.runs import run_create


class EventStreamRenderer(BaseRenderer):
    """Lets a client ask for ``text/event-stream``: a run's POST then answers the run's
    events (the view makes that response itself; this renders nothing)."""

    media_type = "text/event-stream"
    format = "sse"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        raise NotAcceptable()


class _RunStartApi(APIView):
    """A run's POST: validated, stored and queued, then answered with the run's events
    (``Accept: text/event-stream``, what AG-UI clients send) or ``202``
    TaskAcceptedResponse. Errors are JSON ``{"detail"}`` either way."""

    max_payload_bytes = MAX_PAYLOAD_BYTES
    # Whether the stream sends events as AG-UI clients keep them whole (outbound.py)
    # rather than in the spec's shape.
    client_form = False

    def parse(self, raw: Any) -> ConversationTurn:
        raise NotImplementedError

    def post(self, request: Request) -> HttpResponseBase:
        streams = request.accepted_renderer.media_type == EventStreamRenderer.media_type
        cancel_on_disconnect = _cancel_on_disconnect(request) if streams else False
        multitask = _multitask(request)
        body = _read_body(request, self.max_payload_bytes)
        try:
            raw = decode_json_body(body)
        except MalformedJson as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        turn = self.parse(raw)
        # IsAuthenticated has already refused anonymous callers.
        user = cast(AbstractBaseUser, request.user)
        run = run_create(
            user=user,
            run_input=turn.run_input,
            earlier_message_ids=turn.earlier_message_ids,
            multitask=multitask,
            protocol=Run.Protocol.AGUI,
        )
        if not streams:
            response = task_accepted_response(run=run)
            return Response(response.to_wire(), status=status.HTTP_202_ACCEPTED)
        start = event_stream_start(
            user=user, thread_id=run.thread_id, after_id=None, run_id=run.run_id
        )
        events = run_event_stream(
            run=run,
            start=start,
            cancel_on_disconnect=cancel_on_disconnect,
            translate=ClientEvents(run_input=run.input) if self.client_form else None,
        )
        return sse_response(events)

    def handle_exception(self, exc: Exception) -> Response:
        # An error is JSON, whatever the client accepts.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # Only a run's POST answers the event stream (a response of its own): anything else
        # this view answers (OPTIONS' description) is JSON, though the event stream is the
        # media type the view prefers.
        if isinstance(response, Response) and isinstance(
            getattr(request, "accepted_renderer", None), EventStreamRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class RunCreateApi(_RunStartApi):
    """``POST /api/v1/agent/runs``: a RunAgentInput holding the one new user message."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    def parse(self, raw: Any) -> ConversationTurn:
        # The seed's endpoint answers no interrupt: AG-UI 1.0's resume is ignored here.
        run_input = parse_run_agent_input(raw, ignored=frozenset({"resume"}))
        return ConversationTurn(run_input=run_input, earlier_message_ids=None)


class ConversationRunApi(_RunStartApi):
    """``POST /api/v1/agent/ag-ui``: a RunAgentInput as AG-UI clients send it, the whole
    conversation with the new user message last; answered with the run's events in the form
    AG-UI clients keep whole (``202`` JSON only for a client that accepts nothing else)."""

    renderer_classes = [EventStreamRenderer, JSONRenderer]
    max_payload_bytes = CONVERSATION_MAX_PAYLOAD_BYTES
    client_form = True

    def parse(self, raw: Any) -> ConversationTurn:
        return parse_conversation_turn(raw)


def _cancel_on_disconnect(request: Request) -> bool:
    """Whether a client that goes away mid-run cancels it: ``?on_disconnect=cancel`` (the
    default) or ``continue``."""
    value = request.query_params.get("on_disconnect", "cancel")
    if value not in ("cancel", "continue"):
        raise OnDisconnectInvalid()
    return value == "cancel"


def _multitask(request: Request) -> str | None:
    """What the run does when its thread is busy (docs/protocols/multitask.md): the query
    parameter ``multitask``, else the header ``X-Multitask-Strategy``; neither: the
    endpoint's default (``enqueue``)."""
    query = request.query_params.get("multitask")
    if query is not None:
        return multitask_parse(query, field="multitask")
    return multitask_parse(
        request.headers.get("X-Multitask-Strategy"), field="X-Multitask-Strategy"
    )


def _read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, after the size rule (spec: payload ≤ 256KB, measured before parsing)."""
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json":
        raise UnsupportedMediaType(content_type or "none")
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > max_bytes:
        raise RunPayloadTooLarge()
    try:
        body = request.body
    except RequestDataTooBig:
        raise RunPayloadTooLarge() from None
    if len(body) > max_bytes:
        raise RunPayloadTooLarge()
    return body


class StreamTokenCreateApi(APIView):
    """``POST /api/v1/agent/runs/{thread_id}/stream-token``: a short-lived token for
    ``EventSource``, which cannot send an Authorization header."""

    api_key_scope = "read"  # the token it issues only reads the thread's stream

    def post(self, request: Request, thread_id: uuid.UUID) -> Response:
        thread = thread_get_for_user(user=cast(AbstractBaseUser, request.user), thread_id=thread_id)
        token = stream_token_issue(user=request.user, thread_id=thread.id)
        ttl = settings.AGENT_STREAM_TOKEN_TTL_SECONDS
        return Response({"token": token, "expiresIn": ttl}, status=status.HTTP_201_CREATED)


class RunCancelApi(APIView):
    """``POST /api/v1/agent/runs/{run_id}/cancel``: stop a run (owner only). The ``threadId``
    query parameter picks the thread when the caller used the same runId in several."""

    def post(self, request: Request, run_id: str) -> Response:
        thread_id = request.query_params.get("threadId")
        run = run_get_for_user(
            user=cast(AbstractBaseUser, request.user),
            run_id=run_id,
            thread_id=thread_id_or_404(thread_id) if thread_id else None,
        )
        run = run_cancel(run=run)
        body = {"threadId": str(run.thread_id), "runId": run.run_id, "status": run.status}
        return Response(body, status=status.HTTP_200_OK)


class CapabilitiesApi(APIView):
    """``GET /api/v1/agent/ag-ui/capabilities``: what this server's AG-UI agent does, as AG-UI
    1.0's ``AgentCapabilities`` (capabilities.py)."""

    def get(self, request: Request) -> Response:
        return Response(agent_capabilities())
