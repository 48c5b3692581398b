"""A2A over JSON-RPC at ``/a2a`` and the agent card at ``/.well-known/agent-card.json``.
docs/protocols/a2a.md.

A context is a thread; a task is the run that began it (its runId, a UUID, is the task id)
with the follow-ups sent to it after it asked for input (new runs of the thread whose
parent is that run); the task's state is its latest run's. Answers are the task rebuilt
from the stored rows (selectors.py, outbound.py); a stream is the run's journal through the
translator, from its first event, or, for a subscription, from where the snapshot it
starts with was read. A blocking ``SendMessage`` waits on the journal on the event loop
(``agent_runs/awaited.py``). The push notification config methods, and a send's push
config, are push.py's. A method called by its 0.3 name is answered in 0.3 shapes,
converted by the SDK's own ``a2a.compat.v0_3.conversions``."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
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
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import Http404, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from google.protobuf.json_format import MessageToDict
from rest_framework.exceptions import PermissionDenied
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.authentication import api_key_scope_require, request_user
from agent_runs.awaited import awaited_response, run_end_answer
from agent_runs.errors import (
    DomainError,
    InterruptClosed,
    InterruptExpired,
    InterruptOpen,
    ThreadBusy,
    TurnRefused,
)
from agent_runs.events.reads import EventStreamStart, event_stream_start, thread_last_event_id
from agent_runs.events.sse import sse_response
from agent_runs.json_input import JsonBodyParser
from agent_runs.models import Run
from agent_runs.protocols.a2a.card import agent_card_json
from agent_runs.protocols.a2a.errors import A2AApi, A2ARpcError
from agent_runs.protocols.a2a.inbound import (
    PUSH_CONFIG_METHODS,
    RpcCall,
    approval_answers,
    message_multitask,
    message_text,
    rpc_call_parse,
    task_answer_input,
    task_run_input,
    user_message_kept,
)
from agent_runs.protocols.a2a.openapi import error_responses
from agent_runs.protocols.a2a.outbound import (
    ENDED_STATES,
    INPUT_REQUIRED,
    Wire,
)
from agent_runs.protocols.a2a.push import push_config_call, task_push_config_create
from agent_runs.protocols.a2a.results import rpc_result, send_result, task_result
from agent_runs.protocols.a2a.selectors import (
    open_approvals,
    run_request_kept,
    task_runs,
    task_snapshot,
    tasks_of_user,
)
from agent_runs.protocols.a2a.stream import task_events
from agent_runs.push.services import push_url_check
from agent_runs.run_input import RunAgentInput
from agent_runs.selectors.runs import session_thread_id
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.rate_limits import RateLimited
from agent_runs.services.runs import RunOptions, TurnRule, run_create

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
        return _send(request, call, stream=method == "SendStreamingMessage")
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


# The methods.


def _send(request: Request, call: RpcCall, *, stream: bool) -> HttpResponseBase:
    params = cast(SendMessageRequest, call.params)
    if not params.HasField("message"):
        raise InvalidParamsError(message="'message' is required")
    message = params.message
    text = message_text(message)  # any message, an answer too, is checked before it goes
    multitask = message_multitask(message)
    user = request_user(request)
    run_id = str(uuid.uuid4())
    target = _send_target(user=user, message=message, run_id=run_id)
    after_id = thread_last_event_id(thread_id=target.thread_id)
    push = params.configuration.task_push_notification_config
    if params.configuration.HasField("task_push_notification_config"):
        push_url_check(push.url)  # refused before anything is written
    kept = run_request_kept(
        task_id=target.task_id,
        message=user_message_kept(message),
        configuration=_configuration_kept(params),
    )
    try:
        # With a push config, in one transaction: it exists before a worker claims the run.
        with transaction.atomic():
            run = run_create(
                user=user,
                run_input=_run_input(target, message, run_id, text),
                options=RunOptions(request=kept, turn=target.turn),
                multitask=multitask,
                protocol=Run.Protocol.A2A,
            )
            if params.configuration.HasField("task_push_notification_config"):
                task_push_config_create(
                    run=target.earlier[0] if target.earlier else run, config=push
                )
    except Http404:  # a contextId naming the UUID of someone else's thread
        raise TaskNotFoundError(message=f"Context {message.context_id} not found") from None
    except ThreadBusy:
        if target.earlier:  # another follow-up (or an answer from elsewhere) came first
            raise _follow_up_overtaken(user, message.task_id, message.context_id) from None
        raise UnsupportedOperationError(
            message=f"Context {target.thread_id} has a task still working "
            "(metadata.multitask: reject)"
        ) from None
    except TurnRefused:  # another follow-up (or an answer from elsewhere) continued it first
        raise _follow_up_overtaken(user, message.task_id, message.context_id) from None
    runs = [*target.earlier, run]
    if stream:
        return _stream_of(request, call, runs)
    history_length = (
        params.configuration.history_length
        if params.configuration.HasField("history_length")
        else None
    )
    if params.configuration.return_immediately:
        return Response(rpc_result(call, send_result(call, _task_now(runs, history_length))))
    answer = run_end_answer(
        run=runs[-1],
        after_id=after_id,
        read=lambda _ended: _task_result_now(call, runs, history_length),
    )
    return awaited_response(request, answer)


@dataclass(frozen=True)
class _SendTarget:
    """Where a message goes: its task's id and thread, the task's runs so far, the rule of
    turns its run must meet, and the approvals it answers (none: it is a user message)."""

    task_id: str
    thread_id: uuid.UUID
    earlier: list[Run]
    turn: TurnRule | None = None
    approvals: tuple[str, ...] = ()


def _send_target(*, user: AbstractBaseUser, message: Message, run_id: str) -> _SendTarget:
    """A follow-up continues its task (answering its approvals when it waits on some); any
    other message begins a task (the new run) on its context's thread, or a new one."""
    if not message.task_id:
        if not message.context_id:
            return _SendTarget(run_id, uuid.uuid4(), [])
        return _SendTarget(run_id, session_thread_id(user=user, session=message.context_id), [])
    earlier = task_runs(user=user, task_id=message.task_id)
    projection = task_snapshot(runs=earlier).projection
    refusal = _follow_up_refusal(earlier, message.task_id, message.context_id, projection.state)
    if refusal is not None:
        raise refusal
    waited = set(projection.approval_ids)
    approvals = tuple(item.id for item in open_approvals(run=earlier[-1]) if item.id in waited)
    # Checked again by run_create under the thread's lock: the run that asked is still the
    # task's latest, so of two follow-ups (or answers) sent at once only one continues it.
    turn = TurnRule(after_run_id=earlier[-1].run_id, chain=message.task_id)
    return _SendTarget(message.task_id, earlier[0].thread_id, earlier, turn, approvals)


def _run_input(target: _SendTarget, message: Message, run_id: str, text: str) -> RunAgentInput:
    """The run a message makes: an answer to the task's approvals, or a user message."""
    if target.approvals:
        return task_answer_input(
            thread_id=target.thread_id,
            run_id=run_id,
            task_id=target.task_id,
            answers=approval_answers(message, open_ids=list(target.approvals)),
        )
    return task_run_input(
        thread_id=target.thread_id,
        run_id=run_id,
        task_id=target.task_id if target.earlier else None,
        text=text,
    )


def _configuration_kept(params: SendMessageRequest) -> dict[str, Any]:
    """The send's configuration as its run keeps it: without the push config (its token is
    the client's secret; the config is kept as such)."""
    kept: dict[str, Any] = MessageToDict(params.configuration)
    kept.pop("taskPushNotificationConfig", None)
    return kept


def _follow_up_refusal(
    runs: list[Run], task_id: str, context_id: str, state: str | None = None
) -> A2AError | None:
    """Why a message to an existing task may not continue it (``None``: it may): only a
    task that has asked for input takes one."""
    if context_id and context_id != str(runs[0].thread_id):
        return InvalidParamsError(
            message=f"Task {task_id} belongs to context {runs[0].thread_id}, not {context_id}"
        )
    if state is None:
        state = task_snapshot(runs=runs).projection.state
    if state != INPUT_REQUIRED:
        reason = "has ended" if state in ENDED_STATES else "is still working"
        return UnsupportedOperationError(
            message=f"Task {task_id} {reason} ({state}): only a task that asked for input "
            "takes a follow-up message"
        )
    return None


def _follow_up_overtaken(user: AbstractBaseUser, task_id: str, context_id: str) -> A2AError:
    """The error of a follow-up that ``run_create`` refused because another one continued
    the task first: the task as it stands now says why, as if this message came second."""
    refusal = _follow_up_refusal(task_runs(user=user, task_id=task_id), task_id, context_id)
    if refusal is not None:
        return refusal
    # The other follow-up has already ended with a new question: this message answered the
    # one before it.
    return UnsupportedOperationError(
        message=f"Task {task_id} took another follow-up message first and asks for input "
        "again: send a follow-up to its new question"
    )


def _task_now(runs: list[Run], history_length: int | None = None) -> Wire:
    runs[-1].refresh_from_db()  # its status now
    return task_snapshot(runs=runs).projection.task(history_length)


def _task_result_now(call: RpcCall, runs: list[Run], history_length: int | None) -> Any:
    return rpc_result(call, send_result(call, _task_now(runs, history_length)))


def _history_length(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise InvalidParamsError(message="'historyLength' must not be negative")
    return value


def _get(request: Request, call: RpcCall) -> Response:
    params = cast(GetTaskRequest, call.params)
    length = _history_length(params.history_length if params.HasField("history_length") else None)
    runs = task_runs(user=request_user(request), task_id=params.id)
    return Response(rpc_result(call, task_result(call, _task_now(runs, length))))


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
    return Response(rpc_result(call, task_result(call, _task_now(runs))))


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
    run = runs[-1]
    start: EventStreamStart
    if snapshot.last_event_id:  # the run has begun: its journal goes on after the snapshot
        start = EventStreamStart(
            after_id=snapshot.last_event_id, run_id=run.run_id, run_ended=False
        )
    else:
        start = event_stream_start(
            user=request_user(request), thread_id=run.thread_id, after_id=None, run_id=run.run_id
        )
    first = [{"task": snapshot.projection.task()}]
    return sse_response(
        task_events(
            call=call,
            run=run,
            projection=snapshot.projection,
            start=start,
            first=first,
            through_approvals=True,
        )
    )


def _stream_of(request: Request, call: RpcCall, runs: list[Run]) -> StreamingHttpResponse:
    run = runs[-1]
    snapshot = task_snapshot(runs=runs, last_run_events=False)
    start = event_stream_start(
        user=request_user(request), thread_id=run.thread_id, after_id=None, run_id=run.run_id
    )
    first = [{"task": snapshot.projection.task()}]
    return sse_response(
        task_events(call=call, run=run, projection=snapshot.projection, start=start, first=first)
    )
