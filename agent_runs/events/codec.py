"""The journal's codec: AG-UI events to their stored wire JSON, sanitised and checked for order.

docs/spec/sse-events-and-usage.md, sections 1-3 and 7: camelCase top-level fields, the spec's
snake_case business fields kept as they are, internal statistics never on the wire.
"""

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
)

# Backend-only statistics (spec section 3.4): never sent to clients.
INTERNAL_FIELDS = frozenset({"inputTokens", "outputTokens", "cost", "latencyMs", "model"})
TERMINAL_TYPES = frozenset({EventType.RUN_FINISHED.value, EventType.RUN_ERROR.value})
# CUSTOM events of the journal: a run parked at a stage boundary (``value``: ``reason``,
# "pause" or "step", and ``next_stage``), and going on from there.
RUN_PAUSED_EVENT = "run_paused"
RUN_RESUMED_EVENT = "run_resumed"
# A run that ends on tool calls waiting for an answer, just before its ``RUN_FINISHED``
# (``value``: ``interrupts``, the approvals as AG-UI 1.0 ``Interrupt``s, and
# ``pendingToolCallIds``, the client's tool calls).
RUN_INTERRUPTED_EVENT = "run_interrupted"


class EventOrderError(Exception):
    """An event would break the AG-UI ordering rules: a bug in the emitter, never sent."""


# Fields the spec names in snake_case where ag-ui-protocol has camelCase: both are sent.
_SPEC_NAMES = {EventType.TOOL_CALL_RESULT.value: {"toolCallId": "tool_call_id"}}


def encode_event(event: BaseEvent) -> dict[str, Any]:
    """The wire JSON of an event: the fields it was given (so a spec field set to ``null``,
    like ``RUN_ERROR.code``, stays), camelCase for the protocol's own fields."""
    if type(event) in _PLAIN_EVENTS:
        plain = _plain_payload(event)
        if plain is not None:
            return plain
    return _serialised_payload(event)


def _serialised_payload(event: BaseEvent) -> dict[str, Any]:
    """``encode_event``'s answer for any event, from pydantic's serialiser."""
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


# Events sent once per token, whose fields pydantic serialises as they are when they hold
# strings: their wire JSON is built here, as pydantic builds it, without its serialiser.
_PLAIN_EVENTS: dict[type[BaseEvent], tuple[tuple[str, str], ...]] = {
    event_type: tuple(
        (name, field.alias or name) for name, field in event_type.model_fields.items()
    )
    for event_type in (TextMessageContentEvent, ReasoningMessageContentEvent)
}


def _plain_payload(event: BaseEvent) -> dict[str, Any] | None:
    """What the general way gives for an event whose fields given, and extra fields, are
    all strings: ``type``, then the fields given in the class's order by their aliases, then
    the extra fields in their order, internal statistics left out. ``None`` for any other
    value (``None`` itself included), which the general way encodes."""
    payload: dict[str, Any] = {"type": event.type.value}
    given, values = event.model_fields_set, event.__dict__
    for name, alias in _PLAIN_EVENTS[type(event)]:
        if name in given and name != "type":
            value = values[name]
            if type(value) is not str:
                return None
            if alias not in INTERNAL_FIELDS:
                payload[alias] = value
    for key, value in (event.__pydantic_extra__ or {}).items():
        if type(value) is not str:
            return None
        if key not in INTERNAL_FIELDS:
            payload[key] = value
    return payload


def sanitise(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in INTERNAL_FIELDS}


class EventSequence:
    """The ordering rules of one run's events: ``RUN_STARTED`` first, steps, text messages,
    tool calls, reasoning spans and reasoning messages opened before they are continued or
    closed, everything closed before ``RUN_FINISHED``, nothing after the terminal event.
    ``RUN_ERROR`` may end a run at any point."""

    def __init__(self) -> None:
        self.started = False
        self.ended = False
        self.open_steps: set[str] = set()
        self.open_messages: set[str] = set()
        self.open_tool_calls: set[str] = set()
        self.ended_tool_calls: set[str] = set()
        self.open_reasoning: set[str] = set()
        self.open_reasoning_messages: set[str] = set()

    def ended_earlier(self, tool_call_ids: Iterable[str]) -> None:
        """Tool calls an earlier run of the thread started and ended, whose results this run
        gives (it answers that run's interrupts)."""
        self.ended_tool_calls.update(tool_call_ids)

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
        still_open = (
            self.open_steps
            | self.open_messages
            | self.open_tool_calls
            | self.open_reasoning
            | self.open_reasoning_messages
        )
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

    def _on_reasoning_start(self, payload: dict[str, Any]) -> None:
        _open(self.open_reasoning, payload["messageId"], "reasoning")

    def _on_reasoning_end(self, payload: dict[str, Any]) -> None:
        _close(self.open_reasoning, payload["messageId"], "reasoning")

    def _on_reasoning_message_start(self, payload: dict[str, Any]) -> None:
        _open(self.open_reasoning_messages, payload["messageId"], "reasoning message")

    def _on_reasoning_message_content(self, payload: dict[str, Any]) -> None:
        _require(self.open_reasoning_messages, payload["messageId"], "reasoning message")

    def _on_reasoning_message_end(self, payload: dict[str, Any]) -> None:
        _close(self.open_reasoning_messages, payload["messageId"], "reasoning message")


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


# --- reading ----------------------------------------------------------------------------------


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_microseconds(moment: datetime) -> int:
    """A journal time as a stream entry carries it (exact: no float on the way)."""
    return (moment - _EPOCH) // _MICROSECOND


def from_epoch_microseconds(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


class Event:
    """One event of the journal as a stream reads it: its id (the SSE id), its ordinal in its
    run (how a protocol's translator numbers it, the same live and replayed), its type and
    runId, the time it was written (``at``, the same live and replayed), and its JSON as
    stored (``data``), which AG-UI frames as it is. ``payload``, the decoded JSON, is decoded
    on first use (once for every stream of a process reading the same Redis entry: the hub
    shares its events, so a reader never changes a payload)."""

    __slots__ = ("_payload", "at", "data", "id", "run_id", "seq", "type")

    def __init__(
        self,
        id: int,
        seq: int,
        data: str,
        *,
        type: str,
        run_id: str | None,
        at: datetime,
        payload: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.seq = seq
        self.type = type
        self.run_id = run_id
        self.at = at
        self.data = data
        self._payload = payload

    @property
    def payload(self) -> dict[str, Any]:
        if self._payload is None:
            self._payload = json.loads(self.data)
        return self._payload

    def __repr__(self) -> str:
        return f"Event(id={self.id}, seq={self.seq}, type={self.type!r})"


class StoredEntry:
    """One entry of a thread's Redis stream (written by ``emitter.py``): a batch of one run's
    events, ``ids`` in order, ``prev`` the thread's event before them. ``events`` is
    ``None`` for an entry that does not carry its events' ordinals and time (written by a
    worker of an earlier release): a reader takes them from PostgreSQL instead."""

    __slots__ = ("events", "ids", "prev")

    def __init__(self, ids: list[int], prev: int, events: list[Event] | None) -> None:
        self.ids = ids
        self.prev = prev
        self.events = events


_decoder = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def stored_entry_read(fields: dict[bytes, bytes]) -> StoredEntry:
    """The events of a stream entry, each with its JSON text as stored: the list in ``data``
    is decoded once, element by element, and each element's text is a slice of it."""
    ids = [int(event_id) for event_id in fields[b"ids"].split(b",")]
    prev = int(fields[b"prev"])
    if b"seq" not in fields or b"at" not in fields:
        return StoredEntry(ids, prev, None)
    first_seq = int(fields[b"seq"])
    at = from_epoch_microseconds(int(fields[b"at"]))
    text = fields[b"data"].decode()
    events: list[Event] = []
    position = _skip(text, 0, "[")
    for offset, event_id in enumerate(ids):
        if offset:
            position = _skip(text, position, ",")
        payload, end = _decoder.raw_decode(text, position)
        events.append(
            Event(
                event_id,
                first_seq + offset,
                text[position:end],
                type=payload["type"],
                run_id=payload.get("runId"),
                at=at,
                payload=payload,
            )
        )
        position = end
    if _skip(text, position, "]") != len(text):
        raise ValueError(f"entry of events {ids[0]}..{ids[-1]} holds more events than ids")
    return StoredEntry(ids, prev, events)


def _skip(text: str, position: int, expected: str) -> int:
    """The position after ``expected`` (whitespace around it skipped)."""
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    if text[position : position + 1] != expected:
        raise ValueError(f"expected {expected!r} at {position} of a stored batch")
    position += 1
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position
