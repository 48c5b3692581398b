"""What a POST to ``/a2a`` carries, checked before anything is stored: a JSON-RPC 2.0 request
(one, not a batch) naming an A2A 1.0 method with the ``A2A-Version: 1.0`` header, or its
0.3 name (no header, or 0.3), its params as the SDK's 1.0 request type, and the user's
message as the core's ``RunAgentInput``. docs/protocols/a2a.md, Methods; A2A 1.0 section 9
"JSON-RPC Protocol Binding". The 0.3 params are read with the SDK's 0.3 models and turned
into the 1.0 request by its own conversions (``a2a.compat.v0_3``). Pure."""

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage
from packaging.version import InvalidVersion, Version

from agent_runs.errors import MultitaskInvalid
from agent_runs.protocols.a2a.errors import A2ARpcError, RequestId
from agent_runs.run_input import (
    ForwardedProps,
    InputMessage,
    ResumeEntry,
    RunAgentInput,
    multitask_parse,
)

MAX_INPUT_CHARS = 100_000

# The 1.0 methods and their params' types (a2a-sdk's JsonRpcDispatcher.METHOD_TO_MODEL).
METHODS: dict[str, type[ProtoMessage]] = {
    "SendMessage": SendMessageRequest,
    "SendStreamingMessage": SendMessageRequest,
    "GetTask": GetTaskRequest,
    "ListTasks": ListTasksRequest,
    "CancelTask": CancelTaskRequest,
    "SubscribeToTask": SubscribeToTaskRequest,
    "CreateTaskPushNotificationConfig": TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": GetTaskPushNotificationConfigRequest,
    "ListTaskPushNotificationConfigs": ListTaskPushNotificationConfigsRequest,
    "DeleteTaskPushNotificationConfig": DeleteTaskPushNotificationConfigRequest,
    "GetExtendedAgentCard": GetExtendedAgentCardRequest,
}
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})
PUSH_CONFIG_METHODS = frozenset(name for name in METHODS if "PushNotificationConfig" in name)

_Legacy = tuple[str, type[Any], Callable[[Any], ProtoMessage] | None]
# The 0.3 names: the 1.0 method each stands for, the SDK's 0.3 request model and its
# conversion to the 1.0 params (none: the method is refused before its params matter).
LEGACY_METHODS: dict[str, _Legacy] = {
    "message/send": (
        "SendMessage",
        types_v03.SendMessageRequest,
        conversions.to_core_send_message_request,
    ),
    "message/stream": (
        "SendStreamingMessage",
        types_v03.SendStreamingMessageRequest,
        conversions.to_core_send_message_request,
    ),
    "tasks/get": ("GetTask", types_v03.GetTaskRequest, conversions.to_core_get_task_request),
    "tasks/cancel": (
        "CancelTask",
        types_v03.CancelTaskRequest,
        conversions.to_core_cancel_task_request,
    ),
    "tasks/resubscribe": (
        "SubscribeToTask",
        types_v03.TaskResubscriptionRequest,
        conversions.to_core_subscribe_to_task_request,
    ),
    "tasks/pushNotificationConfig/set": (
        "CreateTaskPushNotificationConfig",
        types_v03.SetTaskPushNotificationConfigRequest,
        conversions.to_core_create_task_push_notification_config_request,
    ),
    "tasks/pushNotificationConfig/get": (
        "GetTaskPushNotificationConfig",
        types_v03.GetTaskPushNotificationConfigRequest,
        conversions.to_core_get_task_push_notification_config_request,
    ),
    "tasks/pushNotificationConfig/list": (
        "ListTaskPushNotificationConfigs",
        types_v03.ListTaskPushNotificationConfigRequest,
        conversions.to_core_list_task_push_notification_config_request,
    ),
    "tasks/pushNotificationConfig/delete": (
        "DeleteTaskPushNotificationConfig",
        types_v03.DeleteTaskPushNotificationConfigRequest,
        conversions.to_core_delete_task_push_notification_config_request,
    ),
    "agent/getAuthenticatedExtendedCard": ("GetExtendedAgentCard", object, None),
}


@dataclass(frozen=True)
class RpcCall:
    """One JSON-RPC request: its id, the 1.0 method it calls, its params as the 1.0 request
    type (``None`` for a method refused whatever its params), and whether it came by its 0.3
    name (then it is answered in 0.3 shapes)."""

    request_id: RequestId
    method: str
    params: Any
    legacy: bool = False


def rpc_call_parse(body: Any, *, version: str | None) -> RpcCall:
    """The request in ``body``, sent with the ``A2A-Version`` header ``version``; an
    ``A2ARpcError`` with the protocol's code otherwise."""
    if isinstance(body, list):
        raise A2ARpcError(None, InvalidRequestError(message="Batch requests are not supported"))
    if not isinstance(body, dict):
        raise A2ARpcError(None, InvalidRequestError(message="The request must be a JSON object"))
    request_id = body.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        raise A2ARpcError(
            None,
            InvalidRequestError(message="Invalid request: id must be a string, integer, or null"),
        )
    if body.get("jsonrpc") != "2.0":
        raise A2ARpcError(
            request_id,
            InvalidRequestError(message="Invalid request: 'jsonrpc' must be exactly '2.0'"),
        )
    method = body.get("method")
    if not isinstance(method, str) or not method:
        raise A2ARpcError(request_id, InvalidRequestError(message="Method is required"))
    if method in LEGACY_METHODS:
        return _legacy_call(request_id, method, body, version)
    if method not in METHODS:
        raise A2ARpcError(request_id, MethodNotFoundError(message=f"Method not found: {method}"))
    _version_check(request_id, version, expected="1.0")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise A2ARpcError(request_id, InvalidParamsError(message="'params' must be an object"))
    try:
        # Unknown fields are ignored for forward compatibility, as the SDK's server does.
        parsed = ParseDict(params, METHODS[method](), ignore_unknown_fields=True)
    except Exception as exc:  # the protobuf parser's errors have no common base
        raise A2ARpcError(
            request_id, InvalidParamsError(message=f"Invalid params: {exc}")
        ) from None
    return RpcCall(request_id=request_id, method=method, params=parsed)


def _legacy_call(
    request_id: RequestId, name: str, body: dict[str, Any], version: str | None
) -> RpcCall:
    _version_check(request_id, version, expected="0.3")
    method, model, convert = LEGACY_METHODS[name]
    if convert is None:
        return RpcCall(request_id=request_id, method=method, params=None, legacy=True)
    try:
        params = convert(model.model_validate(body))
    except Exception as exc:  # pydantic's, or the conversion's on a value it cannot map
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise A2ARpcError(
            request_id, InvalidParamsError(message=f"Invalid params: {message}")
        ) from None
    return RpcCall(request_id=request_id, method=method, params=params, legacy=True)


def _version_check(request_id: RequestId, version: str | None, *, expected: str) -> None:
    """As the SDK's ``validate_version``: no header is 0.3; the same major version passes."""
    actual = version or "0.3"
    try:
        compatible = actual == expected or Version(actual).major == Version(expected).major
    except InvalidVersion:
        compatible = False
    if not compatible:
        raise A2ARpcError(
            request_id,
            VersionNotSupportedError(
                message=f"A2A version {actual} is not supported by this method; send "
                f"A2A-Version: {expected}"
            ),
        )


def _message_check(message: Message) -> None:
    if message.role == Role.ROLE_AGENT:
        raise InvalidParamsError(message="'message.role' must be ROLE_USER")
    if not message.message_id:
        raise InvalidParamsError(message="'message.messageId' is required")


def message_text(message: Message) -> str:
    """The user's text: the message's text parts, and its data parts as JSON, joined by
    blank lines. Files (``raw``, ``url``) are a content type the agent does not take."""
    _message_check(message)
    pieces = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif kind in ("raw", "url"):
            raise ContentTypeNotSupportedError(
                message="Only text and data parts are supported, not files"
            )
    text = "\n\n".join(pieces)
    if not text.strip():
        raise InvalidParamsError(message="'message.parts' must hold some text")
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidParamsError(message=f"The message is longer than {MAX_INPUT_CHARS} characters")
    return text


def message_multitask(message: Message) -> str | None:
    """The message's ``metadata.multitask``: what its task does when its context is busy
    (docs/protocols/multitask.md); an unknown value is ``InvalidParamsError`` naming the
    allowed ones."""
    if not message.HasField("metadata"):
        return None
    value = MessageToDict(message.metadata).get("multitask")
    try:
        return multitask_parse(value, field="'message.metadata.multitask'")
    except MultitaskInvalid as exc:
        raise InvalidParamsError(message=str(exc)) from None


def user_message_kept(message: Message) -> dict[str, Any]:
    """The user's message as kept with its run (``Run.request``), for the task's history."""
    kept: dict[str, Any] = MessageToDict(message)
    kept["role"] = "ROLE_USER"
    kept.pop("taskId", None)
    kept.pop("contextId", None)
    return kept


def task_run_input(
    *, thread_id: uuid.UUID, run_id: str, task_id: str | None, text: str
) -> RunAgentInput:
    """A message as the core's command: one chat turn of the context's thread; a follow-up of
    a task (``task_id``) is a new run whose parent is the task's first run."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        parent_run_id=task_id,
        messages=[InputMessage(id=f"msg_{uuid.uuid4().hex}", role="user", content=text)],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


# A person's answer to an approval request: "approve" or "reject", and what follows as the
# reason ("reject: not on Fridays").
_TYPED_ANSWER = re.compile(r"\s*(approve|reject)\b[\s:,.;!-]*(.*)", re.IGNORECASE | re.DOTALL)


def approval_answers(message: Message, *, open_ids: list[str]) -> list[ResumeEntry]:
    """A follow-up to a task waiting on approvals (``open_ids``, those still open) as the
    answers it gives: its data parts ``{interruptId, approved, arguments?, reason?}``, one
    answer each, or else its text "approve" / "reject" (with an optional reason after it)
    for every open one. Whether each answer fits its interrupt is the run core's check."""
    _message_check(message)
    answers: list[ResumeEntry] = []
    texts = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            answers.append(_data_answer(_integral(MessageToDict(part.data))))
        elif kind == "text":
            texts.append(part.text)
        elif kind in ("raw", "url"):
            raise ContentTypeNotSupportedError(
                message="Only text and data parts are supported, not files"
            )
    named = [answer.interrupt_id for answer in answers]
    if len(set(named)) != len(named):
        raise InvalidParamsError(message="Each interrupt may be answered once in a message")
    if answers:
        return answers
    typed = _TYPED_ANSWER.fullmatch("\n".join(texts))
    if typed is None:
        raise InvalidParamsError(
            message=f"The task waits on approval of {', '.join(open_ids)}: answer with a data "
            'part {"interruptId", "approved", "arguments"?, "reason"?} per interrupt, or the '
            'text "approve" or "reject"'
        )
    payload: dict[str, Any] = {"approved": typed[1].lower() == "approve"}
    if typed[2].strip():
        payload["reason"] = typed[2].strip()
    return [
        ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=payload)
        for interrupt_id in open_ids
    ]


def _data_answer(data: Any) -> ResumeEntry:
    if not isinstance(data, dict) or not isinstance(data.get("interruptId"), str):
        raise InvalidParamsError(
            message='An answer\'s data part must be an object with "interruptId" (a string) '
            'and "approved"'
        )
    payload = {key: value for key, value in data.items() if key != "interruptId"}
    try:
        return ResumeEntry(interrupt_id=data["interruptId"], status="resolved", payload=payload)
    except ValueError:  # pydantic's: an id no interrupt has (empty, too long)
        raise InvalidParamsError(
            message=f"Interrupt {json.dumps(data['interruptId'])[:60]} not found"
        ) from None


def _integral(value: Any) -> Any:
    """A data part's JSON with its whole numbers as integers (protobuf's ``Value`` holds
    every number as a double)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def task_answer_input(
    *, thread_id: uuid.UUID, run_id: str, task_id: str, answers: list[ResumeEntry]
) -> RunAgentInput:
    """A follow-up answering a task's approvals as the core's command: a run of the task
    with no message of its own that goes on with the reply they held."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        parent_run_id=task_id,
        messages=[],
        resume=answers,
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )
