"""A run's journal as the Agent API's stream of response, message and content objects.

docs/spec/agent-api-protocol.md (6. Response Models, Content Streaming, Status Transitions);
docs/protocols/agent-api.md. Pure and deterministic: the objects are a function of the run's
stored AG-UI events (in order, from its ``RUN_STARTED``) and of ``ResponseFacts`` (what the
run row says: its ids, when it was created and ended, its usage), so a replay numbers and
words every object exactly as the live stream did. Each object's ``sequence_number`` is its
place in the run's stream from 0, which is also its SSE ``id:``; a resume replays the run and
skips the objects up to the client's ``Last-Event-ID``.

| journal | objects |
|---|---|
| (the run exists) | response ``created`` (sequence 0) |
| RUN_STARTED | response ``in_progress`` |
| TEXT_MESSAGE_START | message ``in_progress`` (``type: "message"``, role assistant) |
| TEXT_MESSAGE_CONTENT | content ``in_progress``, ``delta: true``, ``index: 0``, the piece |
| TEXT_MESSAGE_END | content ``completed`` (the whole text), message ``completed`` |
| TOOL_CALL_START | message ``in_progress`` (``type: "function_call"``) |
| TOOL_CALL_END | data content ``completed`` ``{call_id, name, arguments}``, message ``completed`` |
| TOOL_CALL_RESULT | a ``function_call_output`` message (role tool): ``in_progress``, data content
  ``{call_id, name, output}``, ``completed`` |
| CUSTOM ``run_interrupted`` | an ``mcp_approval_request`` message (role assistant) per
  approval the run stopped on: ``in_progress``, data content ``{id, server_label: "agent",
  name, arguments, interrupt}`` (the interrupt as AG-UI 1.0 gives it), ``completed`` |
| RUN_FINISHED | response ``completed`` with ``output`` and ``usage``; ``incomplete`` when it
  stopped on approvals (the next request answers them: ``mcp_approval_response``) |
| RUN_ERROR | each open message ``incomplete``, then response ``failed`` with ``error
  {code, message}``, or ``canceled`` (``code: "cancelled"``) |

Steps, tool-argument pieces and the journal's other CUSTOM events give nothing.
"""

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_runs.events.codec import RUN_INTERRUPTED_EVENT
from agent_runs.services.lifecycle import RUN_CANCELLED_CODE

Object = dict[str, Any]

# The namespace of the message ids derived from a run's journal.
_MESSAGE_NAMESPACE = uuid.UUID("3b0f9a47-52d1-5c8e-9e61-8f0c2d7a4b19")


@dataclass(frozen=True)
class ResponseFacts:
    """What a response object says that the journal does not: the response (run) id, the
    caller's session name, the creation and end times (Unix seconds), the run's usage and
    what the request asked beyond its input. ``completed_at`` and ``usage`` are read when
    the run has ended (its terminal event is written after both are final)."""

    response_id: str
    session_id: str
    created_at: int
    completed_at: int | None = None
    usage: Mapping[str, Any] | None = None
    request: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _Message:
    id: str
    type: str
    role: str
    content: list[Object] = field(default_factory=list)
    text: str = ""  # a text message's pieces so far
    call: dict[str, str] = field(default_factory=dict)  # a tool call's call_id, name, args

    def wire(self, status: str, content: list[Object] | None) -> Object:
        return {
            "object": "message",
            "status": status,
            "id": self.id,
            "type": self.type,
            "role": self.role,
            "content": content,
            "metadata": {},
        }


class ResponseStream:
    """The objects of one run's stream, numbered as they are made. Feed it the run's events
    in order with ``objects``; ``facts`` may be replaced (with the run's end) before its
    terminal event is fed."""

    def __init__(self, facts: ResponseFacts) -> None:
        self.facts = facts
        self.next_sequence = 0
        self.status = "created"
        self.ended = False
        self.error: Object | None = None
        self.output: list[Object] = []  # the messages that have ended, as they ended
        self.open: dict[str, _Message] = {}  # by the journal's messageId / toolCallId
        self.last_response: Object | None = None
        self.interrupted = False  # the run stopped on approvals: it ends ``incomplete``

    def created(self) -> list[Object]:
        """The stream's first object, before the run has any event."""
        return [self._response("created")]

    def objects(self, payload: Mapping[str, Any]) -> list[Object]:
        """The objects of one journal event of the run (often none), in the order sent."""
        if self.ended:
            return []
        handler = _HANDLERS.get(str(payload.get("type")))
        return handler(self, payload) if handler else []

    def _number(self, obj: Object) -> Object:
        numbered = {"sequence_number": self.next_sequence, **obj}
        self.next_sequence += 1
        return numbered

    def _response(self, status: str) -> Object:
        self.status = status
        final = status in ("completed", "incomplete", "failed", "canceled")
        facts = self.facts
        obj = self._number(
            {
                "object": "response",
                "status": status,
                "id": facts.response_id,
                "created_at": facts.created_at,
                "completed_at": facts.completed_at if final else None,
                "error": self.error,
                "output": list(self.output) if final else None,
                "usage": dict(facts.usage) if final and facts.usage is not None else None,
                "session_id": facts.session_id,
                **facts.request,
            }
        )
        self.last_response = obj
        return obj

    def _message_id(self, key: str) -> str:
        return f"msg_{uuid.uuid5(_MESSAGE_NAMESPACE, f'{self.facts.response_id}/{key}')}"

    def _open(self, key: str, message: _Message) -> list[Object]:
        self.open[key] = message
        return [self._number(message.wire("in_progress", None))]

    def _close(self, key: str, content: Object | None) -> list[Object]:
        """The message's content completed (if any) and the message completed."""
        message = self.open.pop(key)
        objects = []
        if content is not None:
            objects.append(self._number(content))
            message.content.append(content)
        whole = message.wire("completed", list(message.content))
        self.output.append(whole)
        objects.append(self._number(whole))
        return objects

    def _content(self, message: _Message, *, status: str, **fields: Any) -> Object:
        return {
            "object": "content",
            "status": status,
            "index": len(message.content),
            "msg_id": message.id,
            **fields,
        }


def _run_started(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    return [stream._response("in_progress")]


def _text_start(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    key = str(payload.get("messageId"))
    message = _Message(id=stream._message_id(key), type="message", role="assistant")
    return stream._open(key, message)


def _text_content(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    message = stream.open.get(str(payload.get("messageId")))
    if message is None:
        return []
    delta = str(payload.get("delta") or "")
    message.text += delta
    piece = stream._content(message, status="in_progress", type="text", delta=True, text=delta)
    return [stream._number(piece)]


def _text_end(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    key = str(payload.get("messageId"))
    message = stream.open.get(key)
    if message is None:
        return []
    whole = _text_completed(stream, message)
    return stream._close(key, whole)


def _text_completed(stream: ResponseStream, message: _Message) -> Object | None:
    if not message.text:
        return None
    return stream._content(message, status="completed", type="text", delta=False, text=message.text)


def _tool_start(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    call_id = str(payload.get("toolCallId"))
    name = str(payload.get("toolCallName") or "")
    message = _Message(
        id=stream._message_id(f"call/{call_id}"),
        type="function_call",
        role="assistant",
        call={"call_id": call_id, "name": name, "arguments": ""},
    )
    return stream._open(f"call/{call_id}", message)


def _tool_args(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    message = stream.open.get(f"call/{payload.get('toolCallId')}")
    if message is not None:
        message.call["arguments"] += str(payload.get("delta") or "")
    return []


def _tool_end(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    key = f"call/{payload.get('toolCallId')}"
    message = stream.open.get(key)
    if message is None:
        return []
    data = stream._content(
        message, status="completed", type="data", delta=False, data=dict(message.call)
    )
    return stream._close(key, data)


def _tool_result(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    call_id = str(payload.get("tool_call_id") or payload.get("toolCallId"))
    key = f"output/{call_id}"
    message = _Message(id=stream._message_id(key), type="function_call_output", role="tool")
    opened = stream._open(key, message)
    output = {
        "call_id": call_id,
        "name": str(payload.get("tool_name") or ""),
        "output": _text(payload.get("content")),
    }
    data = stream._content(message, status="completed", type="data", delta=False, data=output)
    return [*opened, *stream._close(key, data)]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _custom(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    """A run that stopped on approvals: an ``mcp_approval_request`` message each."""
    if payload.get("name") != RUN_INTERRUPTED_EVENT:
        return []
    value = payload.get("value")
    interrupts = value.get("interrupts", []) if isinstance(value, Mapping) else []
    objects: list[Object] = []
    for interrupt in interrupts:
        stream.interrupted = True
        key = f"approval/{interrupt['id']}"
        metadata = interrupt.get("metadata") or {}
        message = _Message(
            id=stream._message_id(key), type="mcp_approval_request", role="assistant"
        )
        request = {
            "id": interrupt["id"],
            "server_label": "agent",
            "name": str(metadata.get("toolName") or ""),
            "arguments": json.dumps(metadata.get("arguments") or {}, ensure_ascii=False),
            "interrupt": dict(interrupt),
        }
        objects += stream._open(key, message)
        data = stream._content(message, status="completed", type="data", delta=False, data=request)
        objects += stream._close(key, data)
    return objects


def _run_finished(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    stream.ended = True
    return [stream._response("incomplete" if stream.interrupted else "completed")]


def _run_error(stream: ResponseStream, payload: Mapping[str, Any]) -> list[Object]:
    """The run ended early: what was open is ``incomplete`` (and kept in the output), then
    the response is ``canceled``, or ``failed`` with the spec's ``Error``."""
    objects = []
    for message in stream.open.values():
        content = list(message.content)
        if message.type == "message" and message.text:
            content.append(
                stream._content(
                    message, status="incomplete", type="text", delta=False, text=message.text
                )
            )
        whole = message.wire("incomplete", content)
        stream.output.append(whole)
        objects.append(stream._number(whole))
    stream.open.clear()
    stream.ended = True
    code = payload.get("code")
    if code == RUN_CANCELLED_CODE:
        objects.append(stream._response("canceled"))
    else:
        text = str(payload.get("message") or "")
        stream.error = {"code": str(code or "internal_error"), "message": text}
        objects.append(stream._response("failed"))
    return objects


_HANDLERS: dict[str, Callable[[ResponseStream, Mapping[str, Any]], list[Object]]] = {
    "RUN_STARTED": _run_started,
    "TEXT_MESSAGE_START": _text_start,
    "TEXT_MESSAGE_CONTENT": _text_content,
    "TEXT_MESSAGE_END": _text_end,
    "TOOL_CALL_START": _tool_start,
    "TOOL_CALL_ARGS": _tool_args,
    "TOOL_CALL_END": _tool_end,
    "TOOL_CALL_RESULT": _tool_result,
    "CUSTOM": _custom,
    "RUN_FINISHED": _run_finished,
    "RUN_ERROR": _run_error,
}


def response_objects(facts: ResponseFacts, payloads: Iterable[Mapping[str, Any]]) -> list[Object]:
    """Every object of a run's stream, from ``created``, for its stored events."""
    stream = ResponseStream(facts)
    objects = stream.created()
    for payload in payloads:
        objects += stream.objects(payload)
    return objects


def response_current(
    facts: ResponseFacts, payloads: Iterable[Mapping[str, Any]], *, cancelled: bool = False
) -> Object:
    """The latest response object of a run's stream: its final one once the run's journal
    has ended. ``cancelled``: the run was cancelled while queued behind another run of its
    thread, and its journal (``RUN_STARTED``, ``RUN_ERROR`` cancelled) is written when its
    turn comes: the answer is already the final object that journal will give."""
    stream = ResponseStream(facts)
    stream.created()
    payloads = list(payloads)
    for payload in payloads:
        stream.objects(payload)
    if cancelled and not stream.ended:
        if not payloads:
            stream.objects({"type": "RUN_STARTED"})
        stream.objects({"type": "RUN_ERROR", "code": RUN_CANCELLED_CODE})
    assert stream.last_response is not None
    return stream.last_response
