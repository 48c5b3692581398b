"""A2A's ``SendMessage`` and ``SendStreamingMessage`` (docs/protocols/a2a.md, Methods): where a
message goes (a new task, or a follow-up that continues its task, answering its approvals
when it waits on some), the run it makes, and its answer: the task now, once the run has got
somewhere (waited on the event loop, ``agent_runs/api/awaited.py``), or its stream."""

import uuid
from dataclasses import dataclass
from typing import Any, cast

from a2a.types.a2a_pb2 import Message, SendMessageRequest
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import Http404, HttpResponseBase
from google.protobuf.json_format import MessageToDict
from rest_framework.request import Request
from rest_framework.response import Response

from agent_runs.api.authentication import request_user
from agent_runs.api.awaited import awaited_response, run_end_answer
from agent_runs.errors import ThreadBusy, TurnRefused
from agent_runs.events.reads import thread_last_event_id
from agent_runs.models import Run
from agent_runs.protocols.a2a.inbound import (
    RpcCall,
    approval_answers,
    message_multitask,
    message_text,
    task_answer_input,
    task_run_input,
    user_message_kept,
)
from agent_runs.protocols.a2a.outbound import ENDED_STATES, INPUT_REQUIRED, Wire
from agent_runs.protocols.a2a.push import task_push_config_create
from agent_runs.protocols.a2a.results import rpc_result, send_result
from agent_runs.protocols.a2a.selectors import (
    open_approvals,
    run_request_kept,
    task_runs,
    task_snapshot,
)
from agent_runs.protocols.a2a.stream import task_stream
from agent_runs.push.services import push_url_check
from agent_runs.run_input import RunAgentInput
from agent_runs.selectors.runs import session_thread_id
from agent_runs.services.runs import RunOptions, TurnRule, run_create


def send_message(request: Request, call: RpcCall, *, stream: bool) -> HttpResponseBase:
    """``SendMessage`` (``stream``: ``SendStreamingMessage``): a run of the message's task,
    answered with the task (now, or once the run has got somewhere) or its stream."""
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
    if params.configuration.HasField("task_push_notification_config"):
        # Refused before anything is written.
        push_url_check(params.configuration.task_push_notification_config.url)
    kept = run_request_kept(
        task_id=target.task_id,
        message=user_message_kept(message),
        configuration=_configuration_kept(params),
    )
    options = RunOptions(request=kept, turn=target.turn)
    run_input = _run_input(target, message, run_id, text)
    run = _run_create(user, params, target, run_input, options, multitask)
    runs = [*target.earlier, run]
    if stream:
        return task_stream(user=user, call=call, runs=runs)
    return _send_answer(request, call, params, runs, after_id)


def _run_create(
    user: AbstractBaseUser,
    params: SendMessageRequest,
    target: "_SendTarget",
    run_input: RunAgentInput,
    options: RunOptions,
    multitask: str | None,
) -> Run:
    """The message's run, with the send's push config if it has one; the core's refusals
    as the protocol's errors."""
    message = params.message
    try:
        # With a push config, in one transaction: it exists before a worker claims the run.
        with transaction.atomic():
            run = run_create(
                user=user,
                run_input=run_input,
                options=options,
                multitask=multitask,
                protocol=Run.Protocol.A2A,
            )
            if params.configuration.HasField("task_push_notification_config"):
                task_push_config_create(
                    run=target.earlier[0] if target.earlier else run,
                    config=params.configuration.task_push_notification_config,
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
    return run


def _send_answer(
    request: Request, call: RpcCall, params: SendMessageRequest, runs: list[Run], after_id: int
) -> HttpResponseBase:
    """The task now (``returnImmediately``), or once its run has got somewhere."""
    history_length = (
        params.configuration.history_length
        if params.configuration.HasField("history_length")
        else None
    )
    if params.configuration.return_immediately:
        return Response(rpc_result(call, send_result(call, task_now(runs, history_length))))
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


def task_now(runs: list[Run], history_length: int | None = None) -> Wire:
    runs[-1].refresh_from_db()  # its status now
    return task_snapshot(runs=runs).projection.task(history_length)


def _task_result_now(call: RpcCall, runs: list[Run], history_length: int | None) -> Any:
    return rpc_result(call, send_result(call, task_now(runs, history_length)))
