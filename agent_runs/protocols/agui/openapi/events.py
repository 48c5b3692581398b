"""The AG-UI event stream in the OpenAPI schema: the route Channels serves outside Django's
URLconf (``GET /api/v1/agent/runs/{thread_id}/events``, agent_runs/protocols/agui/stream.py),
added by a postprocessing hook, with the ``AgUiEvent`` schema and the stream-token scheme."""

from typing import Any

from ag_ui.core import EventType

# The AG-UI events a run's stream carries (docs/protocols/agui.md, The events of a run).
EVENT_TYPES = [
    EventType.RUN_STARTED,
    EventType.STEP_STARTED,
    EventType.STEP_FINISHED,
    EventType.REASONING_START,
    EventType.REASONING_MESSAGE_START,
    EventType.REASONING_MESSAGE_CONTENT,
    EventType.REASONING_MESSAGE_END,
    EventType.REASONING_END,
    EventType.TEXT_MESSAGE_START,
    EventType.TEXT_MESSAGE_CONTENT,
    EventType.TEXT_MESSAGE_END,
    EventType.TOOL_CALL_START,
    EventType.TOOL_CALL_ARGS,
    EventType.TOOL_CALL_END,
    EventType.TOOL_CALL_RESULT,
    EventType.RUN_FINISHED,
    EventType.RUN_ERROR,
]

AGUI_EVENT_SCHEMA = {
    "type": "object",
    "description": (
        "One AG-UI event as the `data` of an SSE frame, its `type` also the frame's `event` "
        "and its id the frame's `id`. Every event carries `threadId` and `runId`."
    ),
    "properties": {
        "type": {"type": "string", "enum": [kind.value for kind in EVENT_TYPES]},
        "threadId": {"type": "string", "format": "uuid"},
        "runId": {"type": "string"},
    },
    "required": ["type"],
    "additionalProperties": True,
}

EVENT_STREAM_DESCRIPTION = (
    "`retry: 3000`, then one frame per event, `id: <event id>`, `event: <type>`, "
    "`data: <AgUiEvent JSON>`, and `: keep-alive` comments while idle. The event types: "
    + ", ".join(f"`{kind.value}`" for kind in EVENT_TYPES)
    + "."
)

EVENT_STREAM_EXAMPLE = (
    "retry: 3000\n\n"
    'id: 41\nevent: RUN_STARTED\ndata: {"type":"RUN_STARTED","threadId":"…","runId":"run-001"}'
    "\n\n"
    'id: 42\nevent: TEXT_MESSAGE_CONTENT\ndata: {"type":"TEXT_MESSAGE_CONTENT",'
    '"messageId":"worker-run-001","delta":"Hel","threadId":"…","runId":"run-001"}\n\n'
)


def event_stream_content() -> dict[str, Any]:
    """The ``text/event-stream`` media type of a response that streams a run's events."""
    return {
        "text/event-stream": {
            "schema": {"type": "string", "description": EVENT_STREAM_DESCRIPTION},
            "example": EVENT_STREAM_EXAMPLE,
        }
    }


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}},
        },
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "in": "query",
        "name": name,
        "required": False,
        "description": description,
        "schema": schema,
    }


_EVENT_STREAM_OPERATION = {
    "operationId": "runs_events_retrieve",
    "summary": "A thread's events as server-sent events, resumable",
    "description": (
        "Served by a Channels consumer (agent_runs/protocols/agui/stream.py). Without a "
        "cursor the stream starts at the chosen run's RUN_STARTED; with one, right after that "
        "event. It ends after the chosen run's terminal event (RUN_FINISHED or RUN_ERROR) "
        "unless `follow=true`."
    ),
    "tags": ["runs"],
    "parameters": [
        {
            "in": "path",
            "name": "thread_id",
            "required": True,
            "schema": {"type": "string", "format": "uuid"},
        },
        _query(
            "lastEventId",
            "Resume after this event id (the `Last-Event-ID` header wins).",
            {"type": "string", "pattern": "^[0-9]{1,18}$"},
        ),
        {
            "in": "header",
            "name": "Last-Event-ID",
            "required": False,
            "description": "Resume after this event id.",
            "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
        },
        _query(
            "runId",
            "The run whose terminal event ends the stream (default: the thread's latest).",
            {"type": "string", "maxLength": 128},
        ),
        _query(
            "follow",
            "`true` (`1`, `yes`): stay open for the thread's next runs.",
            {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no"]},
        ),
    ],
    "responses": {
        "200": {
            "description": "The thread's events.",
            "headers": {
                "Cache-Control": {"schema": {"type": "string", "const": "no-cache"}},
                "X-Accel-Buffering": {"schema": {"type": "string", "const": "no"}},
            },
            "content": event_stream_content(),
        },
        "400": _error("A Last-Event-ID that is not an event id"),
        "401": _error("No credentials, or bad ones"),
        "404": _error("Not the caller's thread, or a run it does not have"),
        "405": _error("A method other than GET"),
    },
    "security": [{"bearerAuth": []}, {"cookieAuth": []}, {"streamToken": []}],
}

STREAM_TOKEN_SCHEME = {
    "type": "apiKey",
    "in": "query",
    "name": "token",
    "description": (
        "A stream token (`POST /api/v1/agent/runs/{thread_id}/stream-token`), for "
        "`EventSource`, which sends no headers; valid for one thread's event stream."
    ),
}

# Routes Channels serves (config/asgi.py), invisible to DRF: path -> path item.
CHANNELS_PATHS: dict[str, dict[str, Any]] = {
    "/api/v1/agent/runs/{thread_id}/events": {"get": _EVENT_STREAM_OPERATION},
}


def channels_routes_add(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the routes Channels serves, and the shared
    components they use."""
    components = result.setdefault("components", {})
    components.setdefault("securitySchemes", {})["streamToken"] = STREAM_TOKEN_SCHEME
    components.setdefault("schemas", {})["AgUiEvent"] = AGUI_EVENT_SCHEMA
    result.setdefault("paths", {}).update(CHANNELS_PATHS)
    return result
