"""The journal's events in the form AG-UI 1.0's own clients take (``POST /api/v1/agent/ag-ui``).

The spec's events carry fields the AG-UI protocol does not define (``TEXT_MESSAGE_END``'s
``answer``, ``ui_schema`` and usage digest, ``TOOL_CALL_RESULT``'s ``status``, ``result`` and
``error``, ``threadId`` and ``stage`` on every event, ...), and the official clients strip
what their schemas do not describe. Every AG-UI 1.0 event has a ``metadata`` object the
clients keep, so the conversation endpoint's stream moves those fields there.

And a run ends as AG-UI 1.0 says (``ClientEvents``): ``RUN_STARTED`` declares the protocol
version, ``RUN_FINISHED`` carries ``outcome: {"type": "success"}``, and a cancelled run (the
journal's ``RUN_ERROR`` ``code: "cancelled"``) ends in ``RUN_FINISHED`` with ``outcome:
{"type": "cancelled"}``, after the ends of what it left open (a tool call, a text message, a
step: a run may not finish with them open); ``RUN_ERROR`` is a failure only. A function of
the run's events from its ``RUN_STARTED``, where the stream starts: a replay is what the live
stream sent. The ``/runs`` endpoints send the spec's shape as it stands.
"""

from functools import cache
from typing import Any

import ag_ui.core
from ag_ui.core import PROTOCOL_VERSION, BaseEvent, EventType

from agent_runs.services.lifecycle import RUN_CANCELLED_CODE


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


class ClientEvents:
    """One stream's translation: each journal event of a run as the events an AG-UI 1.0
    client takes (``agui_client_event`` each), knowing what the run has left open."""

    def __init__(self) -> None:
        self._open: dict[str, list[Any]] = {"tool calls": [], "messages": [], "steps": []}

    def __call__(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        kind = payload.get("type")
        events = [payload]
        if kind == EventType.RUN_STARTED:
            self._open = {name: [] for name in self._open}
            events = [{**payload, "protocolVersion": PROTOCOL_VERSION}]
        elif kind == EventType.RUN_FINISHED:
            events = [{**payload, "outcome": {"type": "success"}}]
        elif kind == EventType.RUN_ERROR and payload.get("code") == RUN_CANCELLED_CODE:
            events = [*self._ends(), _cancelled(payload)]
        else:
            self._track(kind, payload)
        return [agui_client_event(event) for event in events]

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
    (EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_END, "messageId", "messages"),
    (EventType.STEP_STARTED, EventType.STEP_FINISHED, "stepName", "steps"),
)


def _cancelled(payload: dict[str, Any]) -> dict[str, Any]:
    """A cancelled run's ``RUN_ERROR`` as the ``RUN_FINISHED`` that AG-UI 1.0 ends it with:
    its ``code`` and ``message`` go in the metadata, as any field ``RUN_FINISHED`` lacks."""
    ended = {key: value for key, value in payload.items() if key != "type"}
    return {"type": EventType.RUN_FINISHED.value, **ended, "outcome": {"type": "cancelled"}}
