"""The journal's codec: AG-UI events to their stored wire JSON, sanitised and checked for order.

docs/spec/sse-events-and-usage.md, sections 1-3 and 7: camelCase top-level fields, the spec's
snake_case business fields kept as they are, internal statistics never on the wire.
"""

from typing import Any

from ag_ui.core import BaseEvent, EventType

# Backend-only statistics (spec section 3.4): never sent to clients.
INTERNAL_FIELDS = frozenset({"inputTokens", "outputTokens", "cost", "latencyMs", "model"})
TERMINAL_TYPES = frozenset({EventType.RUN_FINISHED.value, EventType.RUN_ERROR.value})
# CUSTOM events of the journal: a run parked at a stage boundary (``value``: ``reason``,
# "pause" or "step", and ``next_stage``), and going on from there.
RUN_PAUSED_EVENT = "run_paused"
RUN_RESUMED_EVENT = "run_resumed"


class EventOrderError(Exception):
    """An event would break the AG-UI ordering rules: a bug in the emitter, never sent."""


# Fields the spec names in snake_case where ag-ui-protocol has camelCase: both are sent.
_SPEC_NAMES = {EventType.TOOL_CALL_RESULT.value: {"toolCallId": "tool_call_id"}}


def encode_event(event: BaseEvent) -> dict[str, Any]:
    """The wire JSON of an event: the fields it was given (so a spec field set to ``null``,
    like ``RUN_ERROR.code``, stays), camelCase for the protocol's own fields."""
    payload: dict[str, Any] = {"type": event.type.value}
    payload.update(event.model_dump(mode="json", by_alias=True, exclude_unset=True))
    payload["type"] = event.type.value
    fields = type(event).model_fields
    for name in event.model_fields_set & fields.keys():
        if getattr(event, name) is None:  # ag-ui drops None; the spec shows some as null
            payload.setdefault(fields[name].alias or name, None)
    for camel, snake in _SPEC_NAMES.get(payload["type"], {}).items():
        if camel in payload:
            payload.setdefault(snake, payload[camel])
    return sanitise(payload)


def sanitise(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in INTERNAL_FIELDS}


class EventSequence:
    """The ordering rules of one run's events: ``RUN_STARTED`` first, steps, text messages
    and tool calls opened before they are continued or closed, everything closed before
    ``RUN_FINISHED``, nothing after the terminal event. ``RUN_ERROR`` may end a run at any
    point."""

    def __init__(self) -> None:
        self.started = False
        self.ended = False
        self.open_steps: set[str] = set()
        self.open_messages: set[str] = set()
        self.open_tool_calls: set[str] = set()
        self.ended_tool_calls: set[str] = set()

    def check(self, payload: dict[str, Any]) -> None:
        kind = payload["type"]
        if self.ended:
            raise EventOrderError(f"{kind} after the run's terminal event")
        if not self.started:
            if kind != EventType.RUN_STARTED.value:
                raise EventOrderError(f"{kind} before RUN_STARTED")
            self.started = True
            return
        handler = getattr(self, f"_on_{kind.lower()}", None)
        if handler is not None:
            handler(payload)

    def _on_run_started(self, payload: dict[str, Any]) -> None:
        raise EventOrderError("a second RUN_STARTED")

    def _on_run_finished(self, payload: dict[str, Any]) -> None:
        still_open = self.open_steps | self.open_messages | self.open_tool_calls
        if still_open:
            raise EventOrderError(f"RUN_FINISHED with {sorted(still_open)} still open")
        self.ended = True

    def _on_run_error(self, payload: dict[str, Any]) -> None:
        self.ended = True

    def _on_step_started(self, payload: dict[str, Any]) -> None:
        _open(self.open_steps, payload["stepName"], "step")

    def _on_step_finished(self, payload: dict[str, Any]) -> None:
        _close(self.open_steps, payload["stepName"], "step")

    def _on_text_message_start(self, payload: dict[str, Any]) -> None:
        _open(self.open_messages, payload["messageId"], "text message")

    def _on_text_message_content(self, payload: dict[str, Any]) -> None:
        _require(self.open_messages, payload["messageId"], "text message")

    def _on_text_message_end(self, payload: dict[str, Any]) -> None:
        _close(self.open_messages, payload["messageId"], "text message")

    def _on_tool_call_start(self, payload: dict[str, Any]) -> None:
        _open(self.open_tool_calls, payload["toolCallId"], "tool call")

    def _on_tool_call_args(self, payload: dict[str, Any]) -> None:
        _require(self.open_tool_calls, payload["toolCallId"], "tool call")

    def _on_tool_call_end(self, payload: dict[str, Any]) -> None:
        _close(self.open_tool_calls, payload["toolCallId"], "tool call")
        self.ended_tool_calls.add(payload["toolCallId"])

    def _on_tool_call_result(self, payload: dict[str, Any]) -> None:
        if payload["tool_call_id"] not in self.ended_tool_calls:
            raise EventOrderError(f"TOOL_CALL_RESULT before TOOL_CALL_END of {payload!r}")


def _open(opened: set[str], key: str, what: str) -> None:
    if key in opened:
        raise EventOrderError(f"{what} {key!r} started twice")
    opened.add(key)


def _require(opened: set[str], key: str, what: str) -> None:
    if key not in opened:
        raise EventOrderError(f"{what} {key!r} is not open")


def _close(opened: set[str], key: str, what: str) -> None:
    _require(opened, key, what)
    opened.remove(key)
