"""The HTTP API (Django REST framework), its OpenAPI schema, and the web console."""

from config.env import env_str

# The web console (console/; docs/console.md). In development (DEBUG) an anonymous visitor
# from a loopback address is signed in as this user, whose API token the quick start prints.
CONSOLE_DEMO_USERNAME = env_str("CONSOLE_DEMO_USERNAME", "demo")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agent_runs.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "agent_runs.api.authentication.ApiKeyScopes",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "config.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# The OpenAPI schema (/api/schema/) and its pages (/api/docs/, /api/redoc/), described in
# agent_runs/api/openapi.py. Public: the schema holds no secret, and every endpoint it lists still
# asks for credentials.
SPECTACULAR_SETTINGS = {
    "TITLE": "Agent run server API",
    "DESCRIPTION": (
        "Runs AI agents over one run core, through five protocols: AG-UI "
        "(docs/protocols/agui.md), the Agent Protocol (docs/protocols/agent-protocol.md), the "
        "AgentScope Agent API (docs/protocols/agent-api.md), the OpenAI Responses API "
        "(docs/protocols/openai-responses.md) and A2A (docs/protocols/a2a.md). "
        'Errors are `{"detail": "<message>"}`, but for the protocols with an error shape of '
        "their own (the Agent Protocol, the Agent API, OpenAI Responses, A2A's JSON-RPC)."
    ),
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "agent_runs.models.Run.Status",
        "InterruptStatusEnum": "agent_runs.models.Interrupt.Status",
        "BadgeStatusEnum": ["info", "success", "warning", "error", "pending"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agent_runs.protocols.agui.openapi.events.channels_routes_add",
        "agent_runs.api.openapi.api_key_scope_responses_add",
        "agent_runs.api.openapi.run_limit_responses_add",
        "agent_runs.api.openapi.storable_json_bodies_add",
    ],
}
