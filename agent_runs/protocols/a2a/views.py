"""A2A over JSON-RPC at ``/a2a`` and the agent card at ``/.well-known/agent-card.json``.
docs/protocols/a2a.md.

A context is a thread; a task is the run that began it (its runId, a UUID, is the task id)
with the follow-ups sent to it after it asked for input (new runs of the thread whose
parent is that run); the task's state is its latest run's. Answers are the task rebuilt
from the stored rows (selectors.py, outbound.py); a stream is the run's journal through the
translator, from its first event, or, for a subscription, from where the snapshot it
starts with was read. A blocking ``SendMessage`` waits on the journal on the event loop
(``agent_runs/api/awaited.py``). The push notification config methods, and a send's push
config, are push.py's. A method called by its 0.3 name is answered in 0.3 shapes,
converted by the SDK's own ``a2a.compat.v0_3.conversions``."""

import uuid
from collections.abc import Iterable
from typing import Any, cast

from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.http import Http404, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import api_key_scope_require, request_user
from agent_runs.api.json_input import JsonBodyParser
from agent_runs.api.views import ProtocolView
from agent_runs.errors import (
    DomainError,
    InterruptClosed,
    InterruptExpired,
    InterruptOpen,
)
from agent_runs.protocols.a2a.card import agent_card_json
from agent_runs.protocols.a2a.errors import A2ARpcError, render
from agent_runs.protocols.a2a.inbound import (
    PUSH_CONFIG_METHODS,
    RpcCall,
    rpc_call_parse,
)
from agent_runs.protocols.a2a.openapi import error_responses
from agent_runs.protocols.a2a.outbound import (
    ENDED_STATES,
)
from agent_runs.protocols.a2a.push import push_config_call
from agent_runs.protocols.a2a.results import rpc_result, task_result
from agent_runs.protocols.a2a.selectors import (
    task_runs,
    task_snapshot,
    tasks_of_user,
)
from agent_runs.protocols.a2a.send import send_message, task_now
from agent_runs.protocols.a2a.stream import subscription_stream
from agent_runs.selectors.runs import session_thread_id
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.rate_limits import RateLimited

_TAGS = ["a2a"]


class _A2AJsonParser(JsonBodyParser):
    """JSON-RPC bodies: ``application/json`` and A2A's own ``application/a2a+json``."""

    media_type = "application/*"


class _JsonAlways(DefaultContentNegotiation):
    """Answers are JSON or the stream whatever the client accepts: the method decides (the
    SDK's clients send ``Accept: text/event-stream`` for the streaming methods)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        return JSONRenderer(), JSONRenderer.media_type


class A2AApi(ProtocolView):
    """The base of the package's API views: errors as JSON-RPC error objects."""

    error_renderer = staticmethod(render)


class AgentCardApi(A2AApi):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="a2a_agent_card",
        summary="The A2A agent card (1.0, with the 0.3 fields)",
        tags=_TAGS,
        responses={200: OpenApiTypes.OBJECT, **error_responses(406)},
    )
    def get(self, request: Request) -> Response:
        return Response(agent_card_json())


class A2ARpcApi(A2AApi):
    parser_classes = [_A2AJsonParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonAlways
    api_key_scope = None  # the method's own (READ_METHODS), checked once it is parsed

    @extend_schema(
        operation_id="a2a_jsonrpc",
        summary="A2A JSON-RPC: the 1.0 methods (A2A-Version: 1.0) and their 0.3 names",
        tags=_TAGS,
        request=OpenApiTypes.OBJECT,
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="A JSON-RPC result or error object"
            ),
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="SendStreamingMessage / SubscribeToTask: JSON-RPC results as SSE",
            ),
            **error_responses(401),
        },
    )
    def post(self, request: Request) -> HttpResponseBase:
        call = rpc_call_parse(request.data, version=request.headers.get("A2A-Version"))
        scope = "read" if call.method in READ_METHODS else "write"
        try:
            api_key_scope_require(request, scope)
        except PermissionDenied as exc:
            refusal = InvalidRequestError(message=str(exc.detail))
            raise A2ARpcError(call.request_id, refusal, status=403) from None
        try:
            return _dispatch(request, call)
        except A2AError as exc:
            raise A2ARpcError(call.request_id, exc) from None
        except Http404:
            raise A2ARpcError(call.request_id, TaskNotFoundError()) from None
        except (InterruptOpen, InterruptClosed, InterruptExpired) as exc:
            # The task (or its context) does not wait on that approval (any more): the
            # follow-up's conflict, as for a task that is not waiting for input.
            raise A2ARpcError(
                call.request_id, UnsupportedOperationError(message=str(exc))
            ) from None
        except RateLimited as exc:
            refusal = InvalidRequestError(message=str(exc))
            raise A2ARpcError(
                call.request_id, refusal, status=exc.status, headers=exc.headers
            ) from None
        except DomainError as exc:
            error = InvalidParamsError(message=str(exc)) if exc.status < 500 else InternalError()
            raise A2ARpcError(call.request_id, error) from None


# The methods an API key with only the read scope may call.
READ_METHODS = frozenset(
    {
        "GetTask",
        "ListTasks",
        "SubscribeToTask",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "GetExtendedAgentCard",
    }
)


def _dispatch(request: Request, call: RpcCall) -> HttpResponseBase:
    method = call.method
    if method in ("SendMessage", "SendStreamingMessage"):
        return send_message(request, call, stream=method == "SendStreamingMessage")
    if method == "GetTask":
        return _get(request, call)
    if method == "ListTasks":
        return _list(request, call)
    if method == "CancelTask":
        return _cancel(request, call)
    if method == "SubscribeToTask":
        return _subscribe(request, call)
    if method in PUSH_CONFIG_METHODS:
        return Response(rpc_result(call, push_config_call(user=request_user(request), call=call)))
    raise ExtendedAgentCardNotConfiguredError(message="This agent has no extended agent card")


# The methods (SendMessage and SendStreamingMessage: send.py).


def _history_length(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise InvalidParamsError(message="'historyLength' must not be negative")
    return value


def _get(request: Request, call: RpcCall) -> Response:
    params = cast(GetTaskRequest, call.params)
    length = _history_length(params.history_length if params.HasField("history_length") else None)
    runs = task_runs(user=request_user(request), task_id=params.id)
    return Response(rpc_result(call, task_result(call, task_now(runs, length))))


def _list(request: Request, call: RpcCall) -> Response:
    params = cast(ListTasksRequest, call.params)
    size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
        raise InvalidParamsError(message=f"'pageSize' must be from 1 to {MAX_LIST_TASKS_PAGE_SIZE}")
    if params.page_token and not (params.page_token.isascii() and params.page_token.isdigit()):
        raise InvalidParamsError(message="'pageToken' is not one this server gave")
    context_id = None
    if params.context_id:
        try:
            context_id = str(uuid.UUID(params.context_id))
        except ValueError:
            context_id = str(
                session_thread_id(user=request_user(request), session=params.context_id)
            )
    length = _history_length(params.history_length if params.HasField("history_length") else None)
    page = tasks_of_user(
        user=request_user(request),
        context_id=context_id,
        page_size=size,
        page_token=params.page_token,
    )
    tasks = []
    for projection in page.tasks:
        task = projection.task(length)
        if params.status and task["status"]["state"] != _state_name(params.status):
            continue
        if not params.include_artifacts:
            task.pop("artifacts", None)
        tasks.append(task)
    result = {
        "tasks": tasks,
        "nextPageToken": page.next_page_token,
        "pageSize": size,
        "totalSize": page.total_size,
    }
    return Response(rpc_result(call, result))


def _state_name(value: int) -> str:
    return TaskState.Name(cast(Any, value))


def _cancel(request: Request, call: RpcCall) -> Response:
    params = cast(CancelTaskRequest, call.params)
    runs = task_runs(user=request_user(request), task_id=params.id)
    state = task_snapshot(runs=runs).projection.state
    if state in ENDED_STATES:
        raise TaskNotCancelableError(message=f"Task {params.id} cannot be canceled: it is {state}")
    run_cancel(run=runs[-1])
    return Response(rpc_result(call, task_result(call, task_now(runs))))


def _subscribe(request: Request, call: RpcCall) -> HttpResponseBase:
    params = cast(SubscribeToTaskRequest, call.params)
    runs = task_runs(user=request_user(request), task_id=params.id)
    snapshot = task_snapshot(runs=runs)
    # A task waiting on approvals goes on once they are answered, from wherever: the
    # subscription waits with it.
    if snapshot.projection.ended and not snapshot.projection.approval_ids:
        raise UnsupportedOperationError(
            message=f"Task {params.id} is {snapshot.projection.state}: there is nothing to "
            "subscribe to (GetTask reads it)"
        )
    return subscription_stream(user=request_user(request), call=call, runs=runs, snapshot=snapshot)
