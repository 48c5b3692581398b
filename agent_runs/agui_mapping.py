"""AgentScope events to AG-UI events: one pure mapping with per-run state.

spec/sse-events-and-usage.md, section 3. AgentScope's own AG-UI middleware is process-global
and turns errors into RUN_FINISHED (DESIGN.md); this mapping keeps its state per run and
leaves the run's start and end to the caller, who knows whether the reply failed.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agentscope.event import EventType as AgentScopeEventType

_RESULT_STATUS = {"success": "success", "error": "failure", "interrupted": "partial"}


@dataclass
class RunMappingState:
    """What the mapping remembers while one run's reply streams."""

    thread_id: str
    run_id: str
    stage: str
    message_id: str
    text_started: bool = False
    text: str = ""
    tool_names: dict[str, str] = field(default_factory=dict)
    tool_args: dict[str, str] = field(default_factory=dict)
    tool_results: dict[str, str] = field(default_factory=dict)


def map_agentscope_event(event: Any, state: RunMappingState) -> list[BaseEvent]:
    """The AG-UI events for one AgentScope event (often none)."""
    kind = getattr(event, "type", None)
    ids = {"threadId": state.thread_id, "runId": state.run_id}
    if kind == AgentScopeEventType.TEXT_BLOCK_DELTA and event.delta:
        events: list[BaseEvent] = []
        if not state.text_started:
            state.text_started = True
            events.append(
                TextMessageStartEvent(message_id=state.message_id, role="assistant", **ids)
            )
        state.text += event.delta
        events.append(
            TextMessageContentEvent(message_id=state.message_id, delta=event.delta, **ids)
        )
        return events
    if kind == AgentScopeEventType.TOOL_CALL_START:
        state.tool_names[event.tool_call_id] = event.tool_call_name
        state.tool_args[event.tool_call_id] = ""
        return [
            ToolCallStartEvent(
                tool_call_id=event.tool_call_id,
                tool_call_name=event.tool_call_name,
                parent_message_id=state.message_id,
                messageId=state.message_id,
                stage=state.stage,
                **ids,
            )
        ]
    if kind == AgentScopeEventType.TOOL_CALL_DELTA:
        state.tool_args[event.tool_call_id] = state.tool_args.get(event.tool_call_id, "") + (
            event.delta or ""
        )
        return []
    if kind == AgentScopeEventType.TOOL_CALL_END:
        return _tool_call_end(event.tool_call_id, state)
    if kind == AgentScopeEventType.TOOL_RESULT_TEXT_DELTA:
        state.tool_results[event.tool_call_id] = state.tool_results.get(event.tool_call_id, "") + (
            event.delta or ""
        )
        return []
    if kind == AgentScopeEventType.TOOL_RESULT_END:
        return [_tool_call_result(event, state)]
    return []


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
            tool_call_id=tool_call_id, delta=raw_args, args=_parse_args(raw_args), **common
        ),
        ToolCallEndEvent(tool_call_id=tool_call_id, **common),
    ]


def _tool_call_result(event: Any, state: RunMappingState) -> BaseEvent:
    status = _RESULT_STATUS.get(str(getattr(event, "state", "success")), "failure")
    result = state.tool_results.get(event.tool_call_id, "")
    return ToolCallResultEvent(
        message_id=state.message_id,
        tool_call_id=event.tool_call_id,
        content=result,
        role="tool",
        threadId=state.thread_id,
        runId=state.run_id,
        stage=state.stage,
        tool_name=state.tool_names.get(event.tool_call_id, ""),
        tool_call_args=_parse_args(state.tool_args.get(event.tool_call_id, "")),
        status=status,
        result=result,
        error=None if status == "success" else result or "tool failed",
    )


def _parse_args(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}
