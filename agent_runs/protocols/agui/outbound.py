"""The journal's events in the form AG-UI 1.0's own clients take (``POST /api/v1/agent/ag-ui``).

The spec's events carry fields the AG-UI protocol does not define (``TEXT_MESSAGE_END``'s
``answer``, ``ui_schema`` and usage digest, ``TOOL_CALL_RESULT``'s ``status``, ``result`` and
``error``, ``threadId`` and ``stage`` on every event, ...), and the official clients strip
what their schemas do not describe. Every AG-UI 1.0 event has a ``metadata`` object the
clients keep, so the conversation endpoint's stream moves those fields there.

And a run ends as AG-UI 1.0 says (``ClientEvents``): ``RUN_STARTED`` declares the protocol
version, ``RUN_FINISHED`` carries ``outcome: {"type": "success"}``, and a cancelled run (the
journal's ``RUN_ERROR`` ``code: "cancelled"``) ends in ``RUN_FINISHED`` with ``outcome:
{"type": "cancelled"}``, after the ends of what it left open (a tool call, a reasoning
message and its span, a text message, a step: a run may not finish with them open);
``RUN_ERROR`` is a failure only. Its terminal event carries the run's ``usage`` (one
``TokenUsage`` a model it called) and, in its ``metadata``, its ``cost`` (a decimal string, or
``null`` when unknown), ``currency`` and ``costSource``, from the usage records made by the
time the journal ended (``ClientEvents.usage``, which the stream reads, stream.py). A function
of the run's events from its ``RUN_STARTED``, where the stream starts, and of those records:
a replay is what the live stream sent. The ``/runs`` endpoints send the spec's shape as it stands.
"""

from functools import cache
from typing import Any

import ag_ui.core
from ag_ui.core import PROTOCOL_VERSION, BaseEvent, EventType, TokenUsage

from agent_runs.events.codec import RUN_INTERRUPTED_EVENT, Event
from agent_runs.services.lifecycle import RUN_CANCELLED_CODE
from agent_runs.usage import RunUsageByModel, UsageSummary, format_cost


@cache
def _protocol_fields() -> dict[str, frozenset[str]]:
    """Each event type's fields as AG-UI names them on the wire."""
    fields: dict[str, frozenset[str]] = {}
    for value in vars(ag_ui.core).values():
        if not (isinstance(value, type) and issubclass(value, BaseEvent)):
            continue
        kind = value.model_fields["type"].default
        if isinstance(kind, EventType):
            fields[kind.value] = frozenset(
                field.alias or name for name, field in value.model_fields.items()
            )
    return fields


def agui_client_event(payload: dict[str, Any]) -> dict[str, Any]:
    """The event with every field AG-UI does not define for its type moved into its
    ``metadata`` (an event AG-UI does not know is left as it is)."""
    known = _protocol_fields().get(payload.get("type", ""))
    if known is None:
        return payload
    extra = {key: value for key, value in payload.items() if key not in known}
    if not extra:
        return payload
    event = {key: value for key, value in payload.items() if key in known}
    metadata = event.get("metadata")
    event["metadata"] = {**extra, **metadata} if isinstance(metadata, dict) else extra
    return event


# What the stream sends: a client event and the id of the journal event it comes from.
ClientEvent = tuple[int, dict[str, Any]]


class ClientEvents:
    """One stream's translation: each journal event of a run as the events an AG-UI 1.0
    client takes (``agui_client_event`` each), knowing what the run has left open. Pure:
    the run's usage, which its terminal event carries, is given (``usage``) before that event
    is translated (by the stream, which reads it)."""

    def __init__(self, *, run_input: dict[str, Any] | None = None):
        self._open: dict[str, list[Any]] = {what: [] for *_, what in _SPANS}
        self._input = run_input
        self.usage: RunUsageByModel | None = None
        self._outcome: dict[str, Any] = {"type": "success"}

    # The journal's stream ends the run's stream (``thread_events``), not the translation.
    ended = False

    def translate(self, event: Event) -> list[ClientEvent]:
        """The edge kit's ``Translator``: the events of a journal event, each with its id."""
        return [(event.id, sent) for sent in self(event.payload)]

    def __call__(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        kind = payload.get("type")
        events = [payload]
        if kind == EventType.RUN_STARTED:
            self._open = {name: [] for name in self._open}
            self._outcome = {"type": "success"}
            started = {**payload, "protocolVersion": PROTOCOL_VERSION}
            if self._input is not None:
                started["input"] = _input_echo(self._input)
            events = [started]
        elif kind == EventType.CUSTOM and payload.get("name") == RUN_INTERRUPTED_EVENT:
            self._outcome = _outcome(payload.get("value") or {})
            return []
        elif kind == EventType.RUN_FINISHED:
            events = [self._with_usage({**payload, "outcome": self._outcome})]
        elif kind == EventType.RUN_ERROR and payload.get("code") == RUN_CANCELLED_CODE:
            events = [*self._ends(), self._with_usage(_cancelled(payload))]
        elif kind == EventType.RUN_ERROR:
            events = [self._with_usage(payload)]
        else:
            self._track(kind, payload)
        return [agui_client_event(event) for event in events]

    def _with_usage(self, event: dict[str, Any]) -> dict[str, Any]:
        """A terminal event with the run's usage and, in its metadata, its cost."""
        if self.usage is None:
            return event
        usage = [_token_usage(model_id, summary) for model_id, summary in self.usage.models]
        run = self.usage.run
        cost = {
            "cost": None if run.cost is None else format_cost(run.cost),
            "currency": run.currency,
            "costSource": run.cost_source,
        }
        metadata = event.get("metadata")
        metadata = {**metadata, **cost} if isinstance(metadata, dict) else cost
        return {**event, "usage": usage, "metadata": metadata}

    def _track(self, kind: Any, payload: dict[str, Any]) -> None:
        for opening, closing, key, what in _SPANS:
            if kind == opening:
                self._open[what].append(payload.get(key))
            elif kind == closing and payload.get(key) in self._open[what]:
                self._open[what].remove(payload.get(key))

    def _ends(self) -> list[dict[str, Any]]:
        """The end of everything the run left open, the innermost first."""
        ends = []
        for _opening, closing, key, what in _SPANS:
            ends += [{"type": closing.value, key: name} for name in reversed(self._open[what])]
            self._open[what] = []
        return ends


# What a run opens and closes, innermost first: (opening event, closing event, the key that
# names it, what it is).
_SPANS = (
    (EventType.TOOL_CALL_START, EventType.TOOL_CALL_END, "toolCallId", "tool calls"),
    (
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_END,
        "messageId",
        "reasoning messages",
    ),
    (EventType.REASONING_START, EventType.REASONING_END, "messageId", "reasoning"),
    (EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_END, "messageId", "messages"),
    (EventType.STEP_STARTED, EventType.STEP_FINISHED, "stepName", "steps"),
)


def _outcome(value: dict[str, Any]) -> dict[str, Any]:
    """How a run that stopped on tool calls ended: on approvals, an interrupt; on the
    client's own tool calls only, a success naming them."""
    if value.get("interrupts"):
        return {"type": "interrupt", "interrupts": value["interrupts"]}
    return {"type": "success", "pendingToolCallIds": value.get("pendingToolCallIds", [])}


def _input_echo(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The run's input as ``RUN_STARTED.input`` echoes it: its stored snapshot, whose
    images are named by their storage place (no signed URL, a credential, is kept) and so
    are left out of the echo."""
    messages = []
    for message in snapshot.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            text = [block for block in content if block.get("type") == "text"]
            message = {**message, "content": text}
        messages.append(message)
    return {**snapshot, "messages": messages}


def _cancelled(payload: dict[str, Any]) -> dict[str, Any]:
    """A cancelled run's ``RUN_ERROR`` as the ``RUN_FINISHED`` that AG-UI 1.0 ends it with:
    its ``code`` and ``message`` go in the metadata, as any field ``RUN_FINISHED`` lacks."""
    ended = {key: value for key, value in payload.items() if key != "type"}
    return {"type": EventType.RUN_FINISHED.value, **ended, "outcome": {"type": "cancelled"}}


def _token_usage(model_id: str, summary: UsageSummary) -> dict[str, Any]:
    """A model's usage in a run as AG-UI's ``TokenUsage``: ``provider/model`` split at its
    first slash; totals, with the cached input and reasoning tokens as parts of them."""
    provider, _, model = model_id.partition("/")
    usage = TokenUsage(
        provider=provider if model else None,
        model=model or model_id,
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        total_tokens=summary.total_tokens,
        reasoning_tokens=summary.reasoning_tokens,
        cached_input_tokens=summary.cached_prompt_tokens,
    )
    return usage.model_dump(mode="json", by_alias=True, exclude_none=True)
