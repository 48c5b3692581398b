"""A task's runs' journals as A2A 1.0 stream responses and ``Task`` objects.
docs/protocols/a2a.md, The stream.

Pure and deterministic: what a journal event gives is a function of that event and of what
``TaskProjection`` keeps of the run's earlier events (the artifacts so far, the state), so a
replay equals what was sent live. Every object goes through the SDK's protobuf types
(``a2a.types.a2a_pb2.StreamResponse``, ``Task``) and is dumped as the SDK's server dumps it
(``MessageToDict``: camelCase, enums by name, unset fields left out).

| journal | stream response |
|---|---|
| (the run exists) | ``task`` (``TASK_STATE_SUBMITTED``, its history) |
| RUN_STARTED | ``statusUpdate`` ``TASK_STATE_WORKING`` |
| STEP_STARTED / FINISHED | ``statusUpdate`` WORKING, ``metadata {stage, step}`` |
| TEXT_MESSAGE_CONTENT | ``artifactUpdate``: the piece; ``append`` from the second piece on |
| TEXT_MESSAGE_END | ``artifactUpdate`` with an empty piece, ``append``, ``lastChunk`` |
| TOOL_CALL_END | ``statusUpdate`` WORKING, an agent message with a data part
  ``{toolCall: {id, name, arguments}}`` |
| TOOL_CALL_RESULT | ``statusUpdate`` WORKING, a data part ``{toolResult: {id, content}}`` |
| CUSTOM run_interrupted | nothing: the approvals the run's end waits on are kept |
| RUN_FINISHED | ``statusUpdate`` ``TASK_STATE_COMPLETED``; ``TASK_STATE_INPUT_REQUIRED`` with
  the question as its message when the answer's ``resultType`` is ``clarification``, or
  with the approval request (a text part, and a data part ``{interrupt: {...}}`` per
  interrupt) when the run stopped on tool calls that need approval |
| RUN_ERROR | ``statusUpdate`` ``TASK_STATE_FAILED`` with the error's text, or
  ``TASK_STATE_CANCELED`` (``code: "cancelled"``) |

Nothing follows the terminal (or input-required) status update. Other events give nothing.
"""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import StreamResponse, Task
from google.protobuf.json_format import MessageToDict, ParseDict

Wire = dict[str, Any]

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
TERMINAL_STATES = frozenset({COMPLETED, FAILED, CANCELED, "TASK_STATE_REJECTED"})
# A task in these states takes no more events until a follow-up message.
ENDED_STATES = TERMINAL_STATES | {INPUT_REQUIRED}

# The RUN_ERROR code of a cancelled run (agent_runs/services/lifecycle.py).
CANCELLED_CODE = "cancelled"
# The answer's result type when the agent asks the user a question (runtime/output.py).
CLARIFICATION = "clarification"
# The journal's CUSTOM event of a run that ends waiting on approvals (events/codec.py).
RUN_INTERRUPTED = "run_interrupted"
ANSWER_NAME = "answer"


def wire_stream_response(obj: Mapping[str, Any]) -> Wire:
    """A stream response as sent: checked by the SDK's type, dumped as its server does."""
    dumped: Wire = MessageToDict(ParseDict(dict(obj), StreamResponse()))
    return dumped


def wire_task(obj: Mapping[str, Any]) -> Wire:
    dumped: Wire = MessageToDict(ParseDict(dict(obj), Task()))
    return dumped


def agent_message(*, message_id: str, task_id: str, context_id: str, parts: list[Wire]) -> Wire:
    return {
        "messageId": message_id,
        "taskId": task_id,
        "contextId": context_id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }


@dataclass
class TaskProjection:
    """One task, fed its runs' journal events in order: the stream responses each gives
    (``translate``) and the task as it stands (``task``). ``history`` starts with the user
    messages the caller passes in (``user_message`` before each run's events); the agent's
    answers join it as their runs end."""

    task_id: str
    context_id: str
    state: str = SUBMITTED
    status_message: Wire | None = None
    history: list[Wire] = field(default_factory=list)
    artifacts: dict[str, Wire] = field(default_factory=dict)  # by artifactId, in order
    ended: bool = False
    _answer: dict[str, str] = field(default_factory=dict)  # messageId -> text so far
    _calls: dict[str, Wire] = field(default_factory=dict)  # toolCallId -> {id, name, arguments}
    _result_type: str = ""
    # The approvals (AG-UI ``Interrupt`` dicts) the latest run's end waits on.
    _interrupts: list[Wire] = field(default_factory=list)

    @property
    def approval_ids(self) -> list[str]:
        """The interrupts the task waits on (none unless it asks for approval)."""
        if self.state != INPUT_REQUIRED:
            return []
        return [str(item.get("id", "")) for item in self._interrupts]

    def user_message(self, message: Mapping[str, Any]) -> None:
        """A run of the task starts with this user message: the task is submitted again."""
        self.history.append({**message, "taskId": self.task_id, "contextId": self.context_id})
        self.state = SUBMITTED
        self.status_message = None
        self.ended = False
        self._result_type = ""
        self._interrupts = []

    def submitted(self) -> list[Wire]:
        """The stream's first response: the task as it stands, before its run's events."""
        return [wire_stream_response({"task": self.task()})]

    def task(self, history_length: int | None = None) -> Wire:
        """The ``Task`` object now; ``history_length``: only that many latest messages."""
        status: Wire = {"state": self.state}
        if self.status_message is not None:
            status["message"] = self.status_message
        task: Wire = {"id": self.task_id, "contextId": self.context_id, "status": status}
        history = self.history if history_length is None else self.history[-history_length:]
        if history_length != 0 and history:
            task["history"] = history
        if self.artifacts:
            task["artifacts"] = [
                {**artifact, "parts": [{"text": "".join(p["text"] for p in artifact["parts"])}]}
                for artifact in self.artifacts.values()
            ]
        return wire_task(task)

    def settle(self, state: str) -> None:
        """The state the run's row gives before its journal ends (its last event is written
        after the row changes): a completed run whose answer was a question asks for input,
        as its ``RUN_FINISHED`` will say."""
        if state == COMPLETED:
            self._run_finished({})
        elif state in ENDED_STATES:
            self._set_state(state)
        else:
            self.state = state
            self.ended = False

    def approvals_closed(self, *, expired: bool) -> list[Wire]:
        """The approvals the task waits on were closed without a run of the task answering
        them (the status update it then gives; none when it waits on none): expired, the
        task has failed; answered by a run outside it, the task is over."""
        if not self.approval_ids:
            return []
        if not expired:
            return [self._set_state(COMPLETED)]
        names = ", ".join(sorted({_tool_name(item) for item in self._interrupts}))
        message = agent_message(
            message_id=f"expired-{self.approval_ids[0]}",
            task_id=self.task_id,
            context_id=self.context_id,
            parts=[{"text": f"The approval of {names} expired unanswered."}],
        )
        return [self._set_state(FAILED, message)]

    def translate(self, payload: Mapping[str, Any]) -> list[Wire]:
        """The stream responses of one journal event (often none), in order."""
        if self.ended:
            return []
        handler = _HANDLERS.get(str(payload.get("type")))
        if handler is None:
            return []
        return [wire_stream_response(obj) for obj in handler(self, payload)]

    def feed(self, payloads: Iterable[Mapping[str, Any]]) -> None:
        for payload in payloads:
            self.translate(payload)

    def _ids(self) -> Wire:
        return {"taskId": self.task_id, "contextId": self.context_id}

    def _status(self, state: str, message: Wire | None = None, **metadata: Any) -> Wire:
        status: Wire = {"state": state}
        if message is not None:
            status["message"] = message
        update: Wire = {**self._ids(), "status": status}
        if metadata:
            update["metadata"] = metadata
        return {"statusUpdate": update}

    def _set_state(self, state: str, message: Wire | None = None) -> Wire:
        self.state = state
        self.status_message = message
        self.ended = state in ENDED_STATES
        return self._status(state, message)

    def _run_started(self, payload: Mapping[str, Any]) -> list[Wire]:
        return [self._set_state(WORKING)]

    def _step(self, payload: Mapping[str, Any]) -> list[Wire]:
        step = "started" if payload.get("type") == "STEP_STARTED" else "finished"
        return [self._status(WORKING, stage=str(payload.get("stepName", "")), step=step)]

    def _message_content(self, payload: Mapping[str, Any]) -> list[Wire]:
        message_id = str(payload.get("messageId", ""))
        delta = str(payload.get("delta", ""))
        append = message_id in self._answer
        self._answer[message_id] = self._answer.get(message_id, "") + delta
        return [self._chunk(message_id, delta, append=append, last=False)]

    def _message_end(self, payload: Mapping[str, Any]) -> list[Wire]:
        message_id = str(payload.get("messageId", ""))
        self._result_type = str(payload.get("resultType") or payload.get("result_type") or "")
        if message_id not in self._answer:
            self._answer[message_id] = ""
        text = self._answer[message_id]
        self.history.append(
            agent_message(
                message_id=message_id,
                task_id=self.task_id,
                context_id=self.context_id,
                parts=[{"text": text}],
            )
        )
        return [self._chunk(message_id, "", append=True, last=True)]

    def _chunk(self, message_id: str, text: str, *, append: bool, last: bool) -> Wire:
        artifact = self.artifacts.setdefault(
            message_id, {"artifactId": message_id, "name": ANSWER_NAME, "parts": []}
        )
        artifact["parts"].append({"text": text})
        update: Wire = {
            **self._ids(),
            "artifact": {"artifactId": message_id, "name": ANSWER_NAME, "parts": [{"text": text}]},
        }
        if append:
            update["append"] = True
        if last:
            update["lastChunk"] = True
        return {"artifactUpdate": update}

    def _tool_start(self, payload: Mapping[str, Any]) -> list[Wire]:
        call_id = str(payload.get("toolCallId", ""))
        self._calls[call_id] = {
            "id": call_id,
            "name": str(payload.get("toolCallName", "")),
            "arguments": "",
        }
        return []

    def _tool_args(self, payload: Mapping[str, Any]) -> list[Wire]:
        call = self._calls.get(str(payload.get("toolCallId", "")))
        if call is not None:
            call["arguments"] += str(payload.get("delta", ""))
        return []

    def _tool_end(self, payload: Mapping[str, Any]) -> list[Wire]:
        call_id = str(payload.get("toolCallId", ""))
        call = self._calls.get(call_id, {"id": call_id, "name": "", "arguments": ""})
        data = {"toolCall": {**call, "arguments": _json_or_text(call["arguments"])}}
        return [self._tool_status(f"tool-call-{call_id}", data)]

    def _tool_result(self, payload: Mapping[str, Any]) -> list[Wire]:
        call_id = str(payload.get("toolCallId", ""))
        name = self._calls.get(call_id, {}).get("name", "")
        content = payload.get("content")
        data = {
            "toolResult": {
                "id": call_id,
                "name": name,
                "content": _json_or_text(content) if isinstance(content, str) else content,
            }
        }
        return [self._tool_status(f"tool-result-{call_id}", data)]

    def _tool_status(self, message_id: str, data: Wire) -> Wire:
        message = agent_message(
            message_id=message_id,
            task_id=self.task_id,
            context_id=self.context_id,
            parts=[{"data": data, "mediaType": "application/json"}],
        )
        return self._status(WORKING, message)

    def _custom(self, payload: Mapping[str, Any]) -> list[Wire]:
        value = payload.get("value")
        if payload.get("name") == RUN_INTERRUPTED and isinstance(value, Mapping):
            self._interrupts = [dict(item) for item in value.get("interrupts") or []]
        return []

    def _run_finished(self, payload: Mapping[str, Any]) -> list[Wire]:
        if self._interrupts:
            request = approval_request(
                self._interrupts, task_id=self.task_id, context_id=self.context_id
            )
            self.history.append(request)
            return [self._set_state(INPUT_REQUIRED, request)]
        if self._result_type == CLARIFICATION and self.history:
            question = self.history[-1]
            return [self._set_state(INPUT_REQUIRED, question)]
        return [self._set_state(COMPLETED)]

    def _run_error(self, payload: Mapping[str, Any]) -> list[Wire]:
        if payload.get("code") == CANCELLED_CODE:
            return [self._set_state(CANCELED)]
        text = str(payload.get("message") or "The run failed.")
        message = agent_message(
            message_id=f"error-{self.task_id}-{len(self.history)}",
            task_id=self.task_id,
            context_id=self.context_id,
            parts=[{"text": text}],
        )
        return [self._set_state(FAILED, message)]


def approval_request(interrupts: list[Wire], *, task_id: str, context_id: str) -> Wire:
    """The agent's message of a task waiting on approvals: for a person, a text part saying
    what would run and how to answer; for a program, a data part ``{interrupt: {id, reason,
    toolCallId, tool, arguments, message, responseSchema, expiresAt}}`` per interrupt."""
    lines = [
        f"{item.get('message') or f'Allow {_tool_name(item)} to run?'} "
        f"{json.dumps(_arguments(item), ensure_ascii=False, sort_keys=True)}"
        for item in interrupts
    ]
    lines.append('Answer "approve" or "reject".')
    parts: list[Wire] = [{"text": "\n".join(lines)}]
    for item in interrupts:
        interrupt = {
            "id": item.get("id"),
            "reason": item.get("reason"),
            "toolCallId": item.get("toolCallId"),
            "tool": _tool_name(item),
            "arguments": _arguments(item),
            "message": item.get("message") or "",
            "responseSchema": item.get("responseSchema"),
            "expiresAt": item.get("expiresAt"),
        }
        kept = {key: value for key, value in interrupt.items() if value is not None}
        parts.append({"data": {"interrupt": kept}, "mediaType": "application/json"})
    return agent_message(
        message_id=f"approval-{interrupts[0].get('id')}",
        task_id=task_id,
        context_id=context_id,
        parts=parts,
    )


def _tool_name(interrupt: Mapping[str, Any]) -> str:
    return str((interrupt.get("metadata") or {}).get("toolName", ""))


def _arguments(interrupt: Mapping[str, Any]) -> Any:
    return (interrupt.get("metadata") or {}).get("arguments", {})


def _json_or_text(text: str) -> Any:
    """Tool arguments and results as JSON values where they are JSON, else as text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


_HANDLERS = {
    "RUN_STARTED": TaskProjection._run_started,
    "STEP_STARTED": TaskProjection._step,
    "STEP_FINISHED": TaskProjection._step,
    "TEXT_MESSAGE_CONTENT": TaskProjection._message_content,
    "TEXT_MESSAGE_END": TaskProjection._message_end,
    "TOOL_CALL_START": TaskProjection._tool_start,
    "TOOL_CALL_ARGS": TaskProjection._tool_args,
    "TOOL_CALL_END": TaskProjection._tool_end,
    "TOOL_CALL_RESULT": TaskProjection._tool_result,
    "CUSTOM": TaskProjection._custom,
    "RUN_FINISHED": TaskProjection._run_finished,
    "RUN_ERROR": TaskProjection._run_error,
}
