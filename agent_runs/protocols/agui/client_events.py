"""The journal's events in the form AG-UI's own clients keep whole.

The spec's events carry fields the AG-UI protocol does not define (``TEXT_MESSAGE_END``'s
``answer``, ``ui_schema`` and usage digest, ``TOOL_CALL_RESULT``'s ``status``, ``result`` and
``error``, ``threadId`` and ``stage`` on every event, ...), and the official clients strip
what their schemas do not describe. Every AG-UI 1.0 event has a ``metadata`` object the
clients keep, so the conversation endpoint's stream moves those fields there. A pure function
of the stored event: a replay is what the live stream sent. The ``/runs`` endpoints send the
spec's shape as it stands.
"""

from functools import cache
from typing import Any

import ag_ui.core
from ag_ui.core import BaseEvent, EventType


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
