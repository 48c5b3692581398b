"""The OpenAPI schema's generic parts (served at /api/schema/, /api/docs/, /api/redoc/): the
error body every endpoint answers, the bearer-token security scheme, and the postprocessing
hooks that hold for every protocol (the read-only keys' 403, the run limits' 402 and 429, the
storable JSON bodies).

Each view describes itself (``extend_schema``); each protocol's ``openapi`` module holds what
is its own (the AG-UI views and event stream: agent_runs/protocols/agui/openapi/).
"""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Every error: ``{"detail": "<message>"}`` (config/exceptions.py)."""

    detail = serializers.CharField()


_WHEN = {
    400: "Malformed input",
    401: "No credentials, or bad ones",
    403: "A session request without its CSRF token",
    404: "Not found, or not the caller's",
    405: "A method the endpoint does not take",
    409: "A conflict with what exists",
    410: "Gone: what it answers has expired",
    413: "The body is too large",
    415: "An unsupported content type",
    422: "Input that breaks a validation rule",
}


def event_stream_response(description: str, *, example_name: str, example: str) -> OpenApiResponse:
    """A ``200`` that streams server-sent events (``text/event-stream``), with an example."""
    return OpenApiResponse(
        OpenApiTypes.STR,
        description=description,
        examples=[
            OpenApiExample(
                example_name,
                value=example,
                media_type="text/event-stream",
                status_codes=[200],
                response_only=True,
            )
        ],
    )


def error_responses(*statuses: int, **descriptions: str) -> dict[int, OpenApiResponse]:
    """``{status: OpenApiResponse(ErrorSerializer)}`` for ``extend_schema(responses=…)``;
    ``descriptions`` (``e404="…"``) say when, where the default says too little."""
    return {
        status: OpenApiResponse(
            ErrorSerializer, description=descriptions.get(f"e{status}", _WHEN[status])
        )
        for status in statuses
    }


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <token>`` (authentication.py)."""

    target_class = "agent_runs.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token, from `manage.py create_api_token <username>`.",
        }


# The API keys' scopes (authentication.py, ApiKeyScopes) ---------------------------

LACKS_WRITE = "An API key without the `write` scope"
# The operations other than GETs that a key with only the read scope may call.
READ_OPERATIONS = frozenset({"runs_stream_token_create"})


def api_key_scope_responses_add(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every operation but the GETs (and
    ``READ_OPERATIONS``) lists the ``403`` of a read-only API key, in the shape of its own
    ``401`` (each protocol's error shape)."""
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("get", "head", "options"):
                continue
            if operation.get("operationId") in READ_OPERATIONS:
                continue
            responses = operation.setdefault("responses", {})
            if "403" in responses:
                described = responses["403"].get("description", "")
                responses["403"]["description"] = (
                    f"{described}; or {LACKS_WRITE[0].lower()}{LACKS_WRITE[1:]}"
                )
            elif "401" in responses:
                responses["403"] = {**responses["401"], "description": LACKS_WRITE}
    return result


# Budgets and rate limits (billing/budgets.py, agent_runs/services/rate_limits.py) ----------

# The operations that create runs, and so may be refused for a budget reached (402) or a
# rate limit (429, with Retry-After); A2A says a budget in a JSON-RPC error (HTTP 200), and
# OpenAI Responses says both as its 429.
RUN_CREATING_OPERATIONS = frozenset(
    {
        "runs_create",
        "agui_run",
        "agent_api_process",
        "ap_tasks_create",
        "ap_v1_tasks_create",
        "ap_v1_steps_execute",
        "openai_responses_create",
        "a2a_jsonrpc",
    }
)
_NO_402 = frozenset({"openai_responses_create", "a2a_jsonrpc"})
BUDGET_REACHED = "A spending limit of the caller's budget is reached (docs/billing.md)"
RATE_LIMITED = (
    "Over a rate limit: runs per window, or runs active at once; `Retry-After` says when to "
    "try again (docs/operations.md)"
)
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds until a run would be taken.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def run_limit_responses_add(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: each operation that creates runs lists the
    ``402`` of a budget reached and the ``429`` of a rate limit, in the shape of its own
    ``401`` (each protocol's error shape)."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            if operation.get("operationId") not in RUN_CREATING_OPERATIONS:
                continue
            responses = operation.setdefault("responses", {})
            shape = responses.get("401")
            if shape is None:
                continue
            if operation["operationId"] not in _NO_402:
                responses.setdefault("402", {**shape, "description": BUDGET_REACHED})
            limited = "; or a budget reached" if operation["operationId"] in _NO_402 else ""
            responses.setdefault(
                "429", {**shape, "description": RATE_LIMITED + limited, "headers": _RETRY_AFTER}
            )
    return result


# What every JSON body may hold (agent_runs/api/json_input.py) ------------------------------------

# No NUL: PostgreSQL's text and jsonb refuse it. (Nor a lone surrogate, which UTF-8 cannot
# encode: no JSON Schema string holds one, I-JSON forbids them, and the description says so.)
STORABLE_TEXT = "^[^\\u0000]*$"
STORABLE_JSON = {
    "description": (
        "Any JSON value whose strings and keys hold no NUL (U+0000) and no lone surrogate "
        "(a surrogate pair sent as two escapes is the one character it spells), nested at most "
        "64 levels (agent_runs/api/json_input.py): every JSON body is refused otherwise, in its "
        "protocol's error shape."
    ),
    "pattern": STORABLE_TEXT,
    "propertyNames": {"pattern": STORABLE_TEXT},
    "additionalProperties": {"$ref": "#/components/schemas/StorableJson"},
    "items": {"$ref": "#/components/schemas/StorableJson"},
}
_JSON_MEDIA_TYPES = ("application/json", "application/*")


def storable_json_bodies_add(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every JSON request body is also a
    ``StorableJson``, as every JSON body is read (``JsonBodyParser``, the AG-UI runs'
    parsing); and a body that must hold a property is required."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["StorableJson"] = STORABLE_JSON
    storable = {"$ref": "#/components/schemas/StorableJson"}
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            body = operation["requestBody"]
            content = body.get("content", {})
            # drf-spectacular leaves a body given as a plain schema optional: one that must
            # hold a property cannot be left out.
            if any(media.get("schema", {}).get("required") for media in content.values()):
                body["required"] = True
            for media_type in _JSON_MEDIA_TYPES:
                if media_type in content:
                    described = content[media_type].get("schema", {})
                    content[media_type]["schema"] = {"allOf": [described, storable]}
    return result
