"""The AG-UI views' OpenAPI descriptions (docs/protocols/agui.md), kept beside the views rather
than on them: each ``OpenApiViewExtension`` gives drf-spectacular a described subclass of a view
of views.py. config/urls.py imports this module, which registers them.

The event stream (``GET runs/{thread_id}/events``), served by Channels, is described in
events.py.
"""

from typing import Any

from drf_spectacular.extensions import OpenApiViewExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers

from agent_runs.api.openapi import ErrorSerializer, error_responses, event_stream_response
from agent_runs.models import Run
from agent_runs.protocols.agui.openapi.events import (
    EVENT_STREAM_DESCRIPTION,
    EVENT_STREAM_EXAMPLE,
)
from agent_runs.protocols.agui.run_input_schema import run_create_request_schema
from agent_runs.protocols.agui.schemas import TaskAcceptedResponse
from agent_runs.run_input import RunAgentInput

_ACCEPTED = OpenApiResponse(
    TaskAcceptedResponse,
    description="Accepted: the run is queued (`created`: this request created the thread).",
)
_STREAMED = event_stream_response(
    "With `Accept: text/event-stream`: the run's events, from its RUN_STARTED to "
    f"its RUN_FINISHED or RUN_ERROR. {EVENT_STREAM_DESCRIPTION}",
    example_name="events",
    example=EVENT_STREAM_EXAMPLE,
)
_THREAD_ID = "550e8400-e29b-41d4-a716-446655440000"
_FORWARDED_PROPS = {
    "runtime_mode": "chat",
    "client_time": {
        "device_timezone": "Asia/Shanghai",
        "client_now_iso": "2026-11-23T09:30:00+08:00",
        "client_epoch_ms": 1795397400000,
    },
}
_RUN_EXAMPLE = {
    "threadId": _THREAD_ID,
    "runId": "run-001",
    "messages": [{"id": "msg-001", "role": "user", "content": "Hello"}],
    "forwardedProps": _FORWARDED_PROPS,
}
_CONVERSATION_EXAMPLE = {
    "threadId": _THREAD_ID,
    "runId": "run-002",
    "messages": [
        {"id": "msg-001", "role": "user", "content": "Hello"},
        {"id": "worker-run-001", "role": "assistant", "content": "Hello! How can I help?"},
        {"id": "msg-002", "role": "user", "content": "What is on my calendar today?"},
    ],
    "forwardedProps": _FORWARDED_PROPS,
}
_RUN_ERRORS = {
    **error_responses(
        400,
        401,
        403,
        404,
        409,
        413,
        415,
        422,
        e400="Malformed JSON, or a bad `on_disconnect` or `multitask`",
        e404="The thread is another user's",
        e409="The runId is the thread's already, with another body; the new user "
        "message's id is; or the thread is busy and the strategy is `reject`",
        e413="A body over the size limit",
        e422="A RunAgentInput that breaks a validation rule",
    ),
    406: OpenApiResponse(ErrorSerializer, description="An `Accept` the endpoint cannot answer"),
}
# DRF's ?format= picks a renderer too; Accept is the way this API documents.
_NO_FORMAT = OpenApiParameter("format", exclude=True)
_ON_DISCONNECT = OpenApiParameter(
    "on_disconnect",
    str,
    enum=["cancel", "continue"],
    description="When the events are streamed: whether a client that goes away cancels the "
    "run (`cancel`, the default) or leaves it running.",
)
_STRATEGIES = ["reject", "enqueue", "interrupt", "rollback"]
_MULTITASK = OpenApiParameter(
    "multitask",
    str,
    enum=_STRATEGIES,
    description="What the run does when its thread is busy (docs/protocols/multitask.md): "
    "`reject` (409), `enqueue` (the default: after the thread's runs), `interrupt` (the "
    "running run is cancelled, this one goes next) or `rollback` (as interrupt, and the "
    "cancelled run's messages leave the conversation).",
)
_MULTITASK_HEADER = OpenApiParameter(
    "X-Multitask-Strategy",
    str,
    OpenApiParameter.HEADER,
    enum=_STRATEGIES,
    description="The same as `multitask`, as a header (the query parameter wins).",
)

# The run endpoints' ``threadId`` query, for a runId the caller used in several threads.
THREAD_ID_QUERY = OpenApiParameter(
    "threadId",
    OpenApiTypes.UUID,
    description="The thread, when the caller used the runId in several.",
)


_RESUME_EXAMPLE = {
    "threadId": _THREAD_ID,
    "runId": "run-003",
    "messages": [
        {"id": "msg-003", "role": "user", "content": "Put a standup in my calendar at nine"},
        {"id": "worker-run-002", "role": "assistant", "content": ""},
    ],
    "resume": [
        {
            "interruptId": "int-5f0c2b1e9a4d4c6f8e7a1b2c3d4e5f60",
            "status": "resolved",
            "payload": {"approved": True},
        }
    ],
}
_CONVERSATION_ERRORS = {
    **_RUN_ERRORS,
    **error_responses(
        409,
        410,
        e409="The runId is the thread's already, with another body; the new user message's id "
        "is; the thread waits on an interrupt or a client tool call the turn does not answer; "
        "or the interrupt it answers is answered already",
        e410="The interrupt it answers has expired",
    ),
}


def _run_start(
    *,
    operation_id: str,
    summary: str,
    description: str,
    examples: list[OpenApiExample],
    errors: dict[int, Any] = _RUN_ERRORS,
    request: Any = RunAgentInput,
) -> Any:
    """``extend_schema`` of a run's POST: a RunAgentInput in (``request``), the run's events
    (SSE) or its TaskAcceptedResponse (202 JSON) out."""
    return extend_schema(
        examples=examples,
        operation_id=operation_id,
        summary=summary,
        description=description,
        tags=["runs"],
        request=request,
        parameters=[_NO_FORMAT, _ON_DISCONNECT, _MULTITASK, _MULTITASK_HEADER],
        responses={
            (202, "application/json"): _ACCEPTED,
            (200, "text/event-stream"): _STREAMED,
            **{(status, "application/json"): error for status, error in errors.items()},
        },
    )


class RunCreateSchema(OpenApiViewExtension):
    target_class = "agent_runs.protocols.agui.views.RunCreateApi"

    def view_replacement(self) -> Any:
        class Described(self.target_class):  # type: ignore[name-defined]  # a view class
            @_run_start(
                operation_id="runs_create",
                summary="Start a run",
                description="A RunAgentInput holding the one new user message. "
                "Answers `202` TaskAcceptedResponse, or with `Accept: text/event-stream` the "
                "run's events. Idempotent per (threadId, runId).",
                examples=[OpenApiExample("A chat run", value=_RUN_EXAMPLE, request_only=True)],
                request={"application/json": run_create_request_schema()},
            )
            def post(self, request: Any) -> Any:
                return super().post(request)

        return Described


class ConversationRunSchema(OpenApiViewExtension):
    target_class = "agent_runs.protocols.agui.views.ConversationRunApi"
    optional = True  # a view of the AG-UI edge's: no warning should it be renamed

    def view_replacement(self) -> Any:
        class Described(self.target_class):  # type: ignore[name-defined]  # a view class
            @_run_start(
                operation_id="agui_run",
                summary="Run the next turn of a conversation (AG-UI clients)",
                description="A RunAgentInput as AG-UI clients send it: `messages` is the "
                "whole conversation, the new user message last (earlier messages are matched "
                "to the thread's by id), or, to answer the thread's open interrupts, the "
                "client's tool messages last or `resume`. Answers the run's events as SSE, in "
                "the form AG-UI clients keep whole; `202` TaskAcceptedResponse only to a "
                "client that accepts only JSON.",
                examples=[
                    OpenApiExample("The next turn", value=_CONVERSATION_EXAMPLE, request_only=True),
                    OpenApiExample(
                        "An approval's answer", value=_RESUME_EXAMPLE, request_only=True
                    ),
                ],
                errors=_CONVERSATION_ERRORS,
            )
            def post(self, request: Any) -> Any:
                return super().post(request)

        return Described


_RunCancelResponse = inline_serializer(
    "RunCancelResponse",
    {
        "threadId": serializers.UUIDField(),
        "runId": serializers.CharField(),
        "status": serializers.ChoiceField(choices=Run.Status.choices),
    },
)


class RunCancelSchema(OpenApiViewExtension):
    target_class = "agent_runs.protocols.agui.views.RunCancelApi"

    def view_replacement(self) -> Any:
        class Described(self.target_class):  # type: ignore[name-defined]  # a view class
            @extend_schema(
                operation_id="runs_cancel",
                summary="Cancel a run",
                description="A queued run never starts; a running run's job is stopped. "
                "Cancelling a run that has ended changes nothing and answers its status.",
                tags=["runs"],
                request=None,
                parameters=[THREAD_ID_QUERY],
                responses={
                    200: _RunCancelResponse,
                    **error_responses(
                        401,
                        403,
                        404,
                        409,
                        e409="The runId names runs of several threads: pass threadId",
                    ),
                },
            )
            def post(self, request: Any, run_id: str) -> Any:
                return super().post(request, run_id)

        return Described


_StreamTokenResponse = inline_serializer(
    "StreamTokenResponse",
    {
        "token": serializers.CharField(),
        "expiresIn": serializers.IntegerField(help_text="Seconds the token is valid."),
    },
)


class StreamTokenCreateSchema(OpenApiViewExtension):
    target_class = "agent_runs.protocols.agui.views.StreamTokenCreateApi"

    def view_replacement(self) -> Any:
        class Described(self.target_class):  # type: ignore[name-defined]  # a view class
            @extend_schema(
                operation_id="runs_stream_token_create",
                summary="A stream token for EventSource",
                description="A short-lived token that lets `EventSource`, which cannot send "
                "headers, read this one thread's events (`GET …/events?token=`).",
                tags=["runs"],
                request=None,
                responses={201: _StreamTokenResponse, **error_responses(401, 403, 404)},
            )
            def post(self, request: Any, thread_id: Any) -> Any:
                return super().post(request, thread_id)

        return Described


class CapabilitiesSchema(OpenApiViewExtension):
    target_class = "agent_runs.protocols.agui.views.CapabilitiesApi"

    def view_replacement(self) -> Any:
        class Described(self.target_class):  # type: ignore[name-defined]  # a view class
            @extend_schema(
                operation_id="agui_capabilities_retrieve",
                summary="What the AG-UI agent does",
                description="AG-UI 1.0's `AgentCapabilities`: streaming and resumable "
                "streams, backend tools, image input, memory, cancel; what the server does "
                "not do is said so (`false`) or left out.",
                tags=["runs"],
                responses={200: OpenApiTypes.OBJECT, **error_responses(401, 403)},
            )
            def get(self, request: Any) -> Any:
                return super().get(request)

        return Described
