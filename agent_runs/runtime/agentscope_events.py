"""AgentScope events to AG-UI events: one pure mapping with per-run state.

docs/spec/sse-events-and-usage.md, section 3. AgentScope's own AG-UI middleware is process-global
and turns errors into RUN_FINISHED; this mapping keeps its state per run and
leaves the run's start and end to the caller, who knows whether the reply failed.

A model's reasoning (a thinking block: a provider's ``reasoning_content``) is a reasoning span
of AG-UI 1.0 holding one reasoning message, streamed a delta at a time as the text is
(docs/protocols/agui.md, "Reasoning"); AgentScope's own middleware sends only the message
events, without the span that AG-UI 1.0 wraps them in.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agentscope.event import EventType as AgentScopeEventType

from agent_runs.runtime.structured_answer import StructuredAnswer
from agent_runs.services.messages import ReasoningText, ToolResult, tool_message_id

_RESULT_STATUS = {"success": "success", "error": "failure", "interrupted": "partial"}
# AgentScope's tool through which the worker gives its structured output (AgentOutput).
STRUCTURED_OUTPUT_TOOL = "GenerateStructuredOutput"


@dataclass
class RunMappingState:
    """What the mapping remembers while one run's reply streams."""

    thread_id: str
    run_id: str
    stage: str
    message_id: str
    # The worker's text message is its structured answer, streamed as the model writes it;
    # text the model writes outside it (and the memory stage's text) is not sent.
    text_started: bool = False
    text: str = ""
    narration: str = ""
    structured_answers: dict[str, StructuredAnswer] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    tool_args: dict[str, str] = field(default_factory=dict)
    tool_results: dict[str, str] = field(default_factory=dict)
    # The tool calls the reply stopped on, waiting for an answer from outside: an approval
    # (``approval``) or a client's tool (``client_tool``), by tool call id.
    held: dict[str, str] = field(default_factory=dict)
    # Tool calls whose results are not sent (a client's tool: the client has its result).
    quiet_results: set[str] = field(default_factory=set)
    # Calls a person declined, and the result their tool messages say (rather than
    # AgentScope's note to the model).
    declined: dict[str, str] = field(default_factory=dict)
    # Each reasoning message of the stage (its id: its text so far), in order, and the one
    # the model is writing.
    reasoning: dict[str, str] = field(default_factory=dict)
    reasoning_open: str | None = None


def map_agentscope_event(event: Any, state: RunMappingState) -> list[BaseEvent]:
    """The AG-UI events for one AgentScope event (often none)."""
    kind = getattr(event, "type", None)
    if kind == AgentScopeEventType.TOOL_CALL_DELTA:  # most events: a piece of the answer
        tool_call_id = str(getattr(event, "tool_call_id", "") or "")
        if tool_call_id in state.structured_answers:
            return _structured_delta(tool_call_id, event.delta or "", state)
        state.tool_args[tool_call_id] = state.tool_args.get(tool_call_id, "") + (event.delta or "")
        return []
    if kind == AgentScopeEventType.MODEL_CALL_START:
        state.narration = ""  # only the last call's text can stand in for an answer
        return []
    if kind == AgentScopeEventType.TEXT_BLOCK_DELTA:
        state.narration += event.delta or ""
        return []
    if kind in _REASONING_KINDS:
        return _REASONING_KINDS[kind](event, state)
    return _tool_event(kind, event, state)


def _tool_event(kind: Any, event: Any, state: RunMappingState) -> list[BaseEvent]:
    """``map_agentscope_event`` for a tool call's start, end and result, and held calls."""
    tool_call_id = str(getattr(event, "tool_call_id", "") or "")
    if kind == AgentScopeEventType.TOOL_CALL_START and event.tool_call_name == (
        STRUCTURED_OUTPUT_TOOL
    ):
        state.structured_answers[tool_call_id] = StructuredAnswer()
        return []
    if tool_call_id in state.structured_answers:
        return []
    if kind == AgentScopeEventType.TOOL_CALL_START:
        return [_tool_call_start(tool_call_id, event, state)]
    if kind == AgentScopeEventType.TOOL_CALL_END:
        return _tool_call_end(tool_call_id, state)
    if kind == AgentScopeEventType.TOOL_RESULT_TEXT_DELTA:
        if tool_call_id in state.declined:
            state.tool_results[tool_call_id] = state.declined[tool_call_id]
            return []
        state.tool_results[tool_call_id] = state.tool_results.get(tool_call_id, "") + (
            event.delta or ""
        )
        return []
    if kind == AgentScopeEventType.TOOL_RESULT_END:
        if tool_call_id in state.quiet_results:
            return []
        return [_tool_call_result(event, state)]
    if kind in _HOLDS:
        for call in event.tool_calls:
            state.held[call.id] = _HOLDS[kind]
    return []


def _tool_call_start(tool_call_id: str, event: Any, state: RunMappingState) -> BaseEvent:
    state.tool_names[tool_call_id] = event.tool_call_name
    state.tool_args[tool_call_id] = ""
    return ToolCallStartEvent(
        tool_call_id=tool_call_id,
        tool_call_name=event.tool_call_name,
        parent_message_id=state.message_id,
        messageId=state.message_id,
        stage=state.stage,
        threadId=state.thread_id,
        runId=state.run_id,
    )


# AgentScope's events for a reply that stops on tool calls, and what each call waits for.
_HOLDS = {
    AgentScopeEventType.REQUIRE_USER_CONFIRM: "approval",
    AgentScopeEventType.REQUIRE_EXTERNAL_EXECUTION: "client_tool",
}


def reasoning_texts(state: RunMappingState) -> list[ReasoningText]:
    """The stage's reasoning messages as the history keeps them, in the order written."""
    return [
        ReasoningText(message_id=message_id, text=text)
        for message_id, text in state.reasoning.items()
        if text
    ]


def reasoning_end_events(state: RunMappingState) -> list[BaseEvent]:
    """The end of the reasoning the model was writing when its reply broke off (none if it
    was not): a stage that outlives its reply's failure must not leave it open, or the run
    could not finish."""
    return _reasoning_end(None, state)


def _reasoning_start(event: Any, state: RunMappingState) -> list[BaseEvent]:
    """A thinking block opens: a reasoning span and its message, under one id of this
    stage's (``reasoning-<stage message id>-<n>``: the same live and replayed, and never
    a text message's, whose ids AG-UI clients keep in the same list)."""
    events = _reasoning_end(event, state)  # one span at a time
    message_id = f"reasoning-{state.message_id}-{len(state.reasoning) + 1}"
    state.reasoning[message_id] = ""
    state.reasoning_open = message_id
    common = {"stage": state.stage, "threadId": state.thread_id, "runId": state.run_id}
    return [
        *events,
        ReasoningStartEvent(message_id=message_id, **common),
        ReasoningMessageStartEvent(message_id=message_id, role="reasoning", **common),
    ]


def _reasoning_delta(event: Any, state: RunMappingState) -> list[BaseEvent]:
    delta = event.delta or ""
    if not delta:
        return []  # AG-UI takes no empty delta
    events = [] if state.reasoning_open is not None else _reasoning_start(event, state)
    message_id = state.reasoning_open
    assert message_id is not None
    state.reasoning[message_id] += delta
    return [
        *events,
        ReasoningMessageContentEvent(
            message_id=message_id, delta=delta, threadId=state.thread_id, runId=state.run_id
        ),
    ]


def _reasoning_end(event: Any, state: RunMappingState) -> list[BaseEvent]:
    message_id, state.reasoning_open = state.reasoning_open, None
    if message_id is None:
        return []
    ids = {"threadId": state.thread_id, "runId": state.run_id}
    return [
        ReasoningMessageEndEvent(message_id=message_id, **ids),
        ReasoningEndEvent(message_id=message_id, **ids),
    ]


_REASONING_KINDS = {
    AgentScopeEventType.THINKING_BLOCK_START: _reasoning_start,
    AgentScopeEventType.THINKING_BLOCK_DELTA: _reasoning_delta,
    AgentScopeEventType.THINKING_BLOCK_END: _reasoning_end,
}


def answer_text_events(answer: str, state: RunMappingState) -> list[BaseEvent]:
    """What is left to send of the text message once the final answer is known: the start
    if none was sent, and the part of the answer not streamed yet (when what was streamed
    is a prefix of it, as it is unless the model rewrote its answer)."""
    events = _text_start(state)
    if answer.startswith(state.text) and len(answer) > len(state.text):
        events.append(_text_content(answer[len(state.text) :], state))
    return events


def _structured_delta(tool_call_id: str, delta: str, state: RunMappingState) -> list[BaseEvent]:
    answer = state.structured_answers[tool_call_id]
    new_text = answer.feed(delta)
    if len(state.structured_answers) > 1 or not new_text:
        return []  # a second attempt at the output: its answer is sent whole at the end
    if state.text_started:
        return [_text_content(new_text, state)]
    return [*_text_start(state), _text_content(new_text, state)]


def _text_start(state: RunMappingState) -> list[BaseEvent]:
    if state.text_started:
        return []
    state.text_started = True
    return [
        TextMessageStartEvent(
            message_id=state.message_id,
            role="assistant",
            threadId=state.thread_id,
            runId=state.run_id,
        )
    ]


def _text_content(delta: str, state: RunMappingState) -> BaseEvent:
    state.text += delta
    return TextMessageContentEvent(
        message_id=state.message_id, delta=delta, threadId=state.thread_id, runId=state.run_id
    )


def _tool_call_end(tool_call_id: str, state: RunMappingState) -> list[BaseEvent]:
    raw_args = state.tool_args.get(tool_call_id, "")
    common = {
        "messageId": state.message_id,
        "toolCallName": state.tool_names.get(tool_call_id, ""),
        "stage": state.stage,
        "threadId": state.thread_id,
        "runId": state.run_id,
    }
    return [
        ToolCallArgsEvent(
            tool_call_id=tool_call_id, delta=raw_args, args=parse_tool_args(raw_args), **common
        ),
        ToolCallEndEvent(tool_call_id=tool_call_id, **common),
    ]


def _tool_call_result(event: Any, state: RunMappingState) -> BaseEvent:
    status = _RESULT_STATUS.get(str(getattr(event, "state", "success")), "failure")
    result = state.tool_results.get(event.tool_call_id, "")
    return ToolCallResultEvent(
        message_id=tool_message_id(event.tool_call_id),
        tool_call_id=event.tool_call_id,
        content=result,
        role="tool",
        threadId=state.thread_id,
        runId=state.run_id,
        stage=state.stage,
        tool_name=state.tool_names.get(event.tool_call_id, ""),
        tool_call_args=parse_tool_args(state.tool_args.get(event.tool_call_id, "")),
        status=status,
        result=result,
        error=None if status == "success" else result or "tool failed",
    )


def parse_tool_args(raw: str) -> dict[str, Any]:
    """A tool call's JSON arguments as an object (what is not one, kept under a key)."""
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def tool_results(state: RunMappingState) -> list[ToolResult]:
    return [
        ToolResult(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            args=state.tool_args.get(tool_call_id, ""),
            result=state.tool_results.get(tool_call_id, ""),
        )
        for tool_call_id, tool_name in state.tool_names.items()
    ]
