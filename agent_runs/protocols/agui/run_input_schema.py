"""The JSON Schema of ``POST /api/v1/agent/runs``' body: a RunAgentInput holding the one new
user message, with the spec's validation rules (docs/spec/run-agent-input.md, Validation
Rules; inbound.py) as far as JSON Schema can state them, so that a body the schema allows is
one the endpoint takes. Two rules name what the server holds, as formats: an image's
``url`` is an ``attachment-url``, an automation run's job an ``automation-job``.

What no schema can state is said in words: the user message's text is at most 10,000
characters in all (each text block is bounded alone), the body at most 256 KB, and a tool
message answers a client tool call the thread has pending.

The message, tool and context objects are RunAgentInput's own components (the AG-UI
conversation endpoint's body, described by its model).
"""

from typing import Any

from agent_runs.agent_config import MCP_TOOL_PREFIX
from agent_runs.api.json_input import MAX_JSON_DEPTH, NOT_BLANK_PATTERN
from agent_runs.protocols.agui.inbound import (
    MAX_ATTACHMENTS_PER_MESSAGE,
    MAX_EPOCH_MS,
    MAX_MESSAGES,
    MAX_PAYLOAD_BYTES,
    MAX_RUN_ID_LENGTH,
    MAX_USER_TEXT_CHARS,
    RFC3339_WITH_OFFSET,
)
from agent_runs.run_input import AUTOMATION_JOB_CONTEXT, iana_timezones
from agent_runs.services.runs import client_tool_names_taken

# A signed URL this service issued for an image of the caller's, not expired.
ATTACHMENT_URL_FORMAT = "attachment-url"
# The name of an automation job the caller may run: its own, or a shared one (no owner).
AUTOMATION_JOB_FORMAT = "automation-job"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_TEXT_BLOCK = {
    "allOf": [
        _ref("TextContentBlock"),
        {"properties": {"text": {"maxLength": MAX_USER_TEXT_CHARS}}},
    ]
}
_IMAGE_BLOCK = {
    "type": "object",
    "required": ["type", "mimeType", "url"],
    "properties": {
        "type": {"const": "binary"},
        "mimeType": {
            "type": "string",
            "pattern": "^[Ii][Mm][Aa][Gg][Ee]/",
            "description": "An image/* type (the stored image's own type is what the run keeps).",
        },
        "url": {
            "type": "string",
            "format": ATTACHMENT_URL_FORMAT,
            "description": "A signed URL of an image of the caller's, from `POST "
            "/api/v1/agent/attachments` or `GET /api/v1/agent/attachments/signed-url`, not "
            "expired.",
        },
        "id": {"type": ["string", "null"]},
        "filename": {"type": ["string", "null"]},
        "data": {"type": "null", "description": "Not allowed: images go by `url`."},
    },
}
_IS_TEXT = {"properties": {"type": {"const": "text"}}}
_IS_IMAGE = {"properties": {"type": {"const": "binary"}}}
_USER_CONTENT = {
    "anyOf": [
        {"type": "string", "maxLength": MAX_USER_TEXT_CHARS, "pattern": NOT_BLANK_PATTERN},
        {
            "type": "array",
            "items": {
                "if": _IS_IMAGE,
                "then": _IMAGE_BLOCK,
                "else": _TEXT_BLOCK,
            },
            # Some text, or an image; at most three images.
            "anyOf": [
                {"contains": {"properties": {"text": {"pattern": NOT_BLANK_PATTERN}}, **_IS_TEXT}},
                {"contains": _IS_IMAGE},
            ],
            "contains": _IS_IMAGE,
            "minContains": 0,
            "maxContains": MAX_ATTACHMENTS_PER_MESSAGE,
        },
    ],
    "description": f"At most {MAX_USER_TEXT_CHARS} characters of text in all (a list's text "
    "blocks joined by newlines); not blank, unless it holds an image.",
}
_USER_MESSAGE = {
    "allOf": [
        _ref("InputMessage"),
        {
            "required": ["content"],
            "properties": {"role": {"const": "user"}, "content": _USER_CONTENT},
        },
    ]
}
_EARLIER_MESSAGE = {
    "allOf": [_ref("InputMessage"), {"properties": {"role": {"not": {"const": "user"}}}}],
    "description": "Any role but user. A tool message answers a client tool call the thread "
    "has pending.",
}
_CLIENT_TIME = {
    "allOf": [
        _ref("ClientTime"),
        {
            "properties": {
                "device_timezone": {"enum": sorted(iana_timezones())},
                "client_now_iso": {
                    "format": "date-time",
                    "pattern": RFC3339_WITH_OFFSET.pattern,
                },
                "client_epoch_ms": {"minimum": 0, "maximum": MAX_EPOCH_MS},
            }
        },
    ]
}
_FORWARDED_PROPS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["runtime_mode"],
    "properties": {
        "runtime_mode": {"enum": ["chat", "automation"]},
        "client_time": _CLIENT_TIME,
    },
}
_AUTOMATION_JOB_ITEM = {
    "required": ["description", "value"],
    "properties": {
        "description": {"const": AUTOMATION_JOB_CONTEXT},
        "value": {"type": "string", "format": AUTOMATION_JOB_FORMAT},
    },
}


def _client_tool() -> dict[str, Any]:
    """A client's tool: named as no tool of the server is, nor with MCP servers' prefix."""
    return {
        "allOf": [
            _ref("Tool"),
            {"properties": {"name": {"not": {"enum": client_tool_names_taken()}}}},
            # Nor the prefix of MCP servers' tools.
            {"properties": {"name": {"not": {"pattern": f"^{MCP_TOOL_PREFIX}"}}}},
        ]
    }


_RUN_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_RUN_ID_LENGTH,
    "pattern": NOT_BLANK_PATTERN,
}


def run_create_request_schema() -> dict[str, Any]:
    """The body of ``POST /api/v1/agent/runs`` (module docstring)."""
    return {
        "type": "object",
        "title": "RunAgentInput (one new user message)",
        "description": f"At most {MAX_PAYLOAD_BYTES // 1024} KB, nested at most "
        f"{MAX_JSON_DEPTH} levels. Fields may be spelt in snake_case too; others are ignored.",
        "required": ["threadId", "runId", "messages", "forwardedProps"],
        "properties": {
            "threadId": {"type": "string", "format": "uuid"},
            "runId": dict(_RUN_ID),
            "parentRunId": {"type": ["string", "null"], "maxLength": MAX_RUN_ID_LENGTH},
            "state": {},
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_MESSAGES,
                "prefixItems": [_USER_MESSAGE],
                "items": _EARLIER_MESSAGE,
                "description": "The new user message first, and only it of role user.",
            },
            "tools": {"type": "array", "items": _client_tool()},
            "context": {"type": "array", "items": _ref("Context")},
            "forwardedProps": _FORWARDED_PROPS,
            "resume": {
                "description": "Ignored here: `POST /api/v1/agent/ag-ui` answers interrupts."
            },
        },
        # An automation run names its job: the first context item described automation_job.
        "if": {
            "properties": {
                "forwardedProps": {"properties": {"runtime_mode": {"const": "automation"}}}
            }
        },
        "then": {
            "required": ["context"],
            "properties": {"context": {"contains": _AUTOMATION_JOB_ITEM}},
        },
    }
