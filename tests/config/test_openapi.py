"""The OpenAPI schema (agent_runs/api/openapi.py): it generates with no warning and validates, it
describes every route the project serves (Channels' too), and it and its pages are public."""

import re
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.urls import URLPattern, URLResolver, get_resolver

from agent_runs.protocols.agui.routing import http_urlpatterns as channels_routes

# Not the API: the admin, the schema's pages, the probes and metrics (docs/operations.md).
NOT_API = (
    "admin/",
    "api/schema/",
    "api/docs/",
    "api/redoc/",
    "healthz",
    "readyz",
    "metrics",
    "console/",
)
# Neither are the root's redirect to the console and the API prefixes' catch-all 404.
NOT_API_NAMES = {"home", "unrouted"}


def schema_json(client: Any) -> dict[str, Any]:
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def openapi_path(route: str) -> str:
    """``runs/<uuid:thread_id>/events`` as OpenAPI writes it: ``/runs/{thread_id}/events``."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route).rstrip("/")


def routes(patterns: list[Any], prefix: str = "") -> list[str]:
    """Every route of a URLconf, includes followed."""
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.extend(routes(pattern.url_patterns, route))
        elif isinstance(pattern, URLPattern) and pattern.name not in NOT_API_NAMES:
            found.append(route)
    return found


def test_the_schema_generates_with_no_warning_and_validates():
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr  # --fail-on-warn: a warning fails it
    assert "Schema generation summary" not in result.stderr, result.stderr
    assert result.stdout.startswith("openapi: 3.1.0")


@pytest.mark.django_db
def test_every_route_the_project_serves_is_in_the_schema(client):
    django_routes = [
        route for route in routes(get_resolver().url_patterns) if not route.startswith(NOT_API)
    ]
    served = {openapi_path(route) for route in django_routes} | {
        openapi_path(str(pattern.pattern)) for pattern in channels_routes
    }

    described = set(schema_json(client)["paths"])

    assert served == described
    assert "/api/v1/agent/runs/{thread_id}/events" in described
    assert "/api/v1/agent/threads/{thread_id}/runs" in described


@pytest.mark.django_db
def test_every_operation_says_what_its_errors_look_like(client):
    schema = schema_json(client)
    error = {"$ref": "#/components/schemas/Error"}
    # The Agent Protocol answers in its own shape (agent_runs/protocols/agent_protocol/errors.py).
    agent_protocol_error = {"$ref": "#/components/schemas/AgentProtocolError"}

    for path, item in schema["paths"].items():
        for method, operation in item.items():
            errors = {code: r for code, r in operation["responses"].items() if code >= "400"}
            assert errors, (method, path)
            expected = agent_protocol_error if path.startswith(("/api/tasks", "/ap/v1/")) else error
            if path.startswith("/api/v1/agent/process"):  # the Agent API's own shape
                expected = {"$ref": "#/components/schemas/AgentApiError"}
            if path.startswith("/openai/v1/"):  # OpenAI's shape (openai_responses/errors.py)
                expected = {"$ref": "#/components/schemas/OpenAIError"}
            if path in ("/a2a", "/.well-known/agent-card.json"):  # JSON-RPC's (a2a/errors.py)
                expected = {"$ref": "#/components/schemas/A2AError"}
            for code, response in errors.items():
                assert response["content"]["application/json"]["schema"] == expected, (path, code)
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]


@pytest.mark.django_db
def test_the_schema_s_description_names_the_five_protocols_and_their_pages(client):
    description = schema_json(client)["info"]["description"]
    for protocol, page in [
        ("AG-UI", "agui.md"),
        ("Agent Protocol", "agent-protocol.md"),
        ("AgentScope Agent API", "agent-api.md"),
        ("OpenAI Responses API", "openai-responses.md"),
        ("A2A", "a2a.md"),
    ]:
        assert f"{protocol} (docs/protocols/{page})" in description
        assert (settings.BASE_DIR / "docs" / "protocols" / page).is_file()


@pytest.mark.django_db
def test_the_schema_names_the_bearer_token_and_the_session(client):
    schema = schema_json(client)

    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerAuth"]["scheme"] == "bearer"
    assert schemes["cookieAuth"] == {"type": "apiKey", "in": "cookie", "name": "sessionid"}
    threads = schema["paths"]["/api/v1/agent/threads"]["get"]
    assert threads["security"] == [{"bearerAuth": []}, {"cookieAuth": []}]
    signed = schema["paths"]["/storage/v1/object/sign/{bucket}/{path}"]["get"]
    assert signed.get("security", []) in ([], [{}])  # the token in its URL is the credential


@pytest.mark.django_db
def test_a_run_post_answers_json_or_its_event_stream(client):
    paths = schema_json(client)["paths"]

    for path in ("/api/v1/agent/runs", "/api/v1/agent/ag-ui"):
        operation = paths[path]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]["allOf"][0]
        if path == "/api/v1/agent/ag-ui":
            assert body == {"$ref": "#/components/schemas/RunAgentInput"}
        else:  # the one new user message, first: RunAgentInput's messages with the rules
            assert body["title"] == "RunAgentInput (one new user message)"
            messages = body["properties"]["messages"]
            assert messages["prefixItems"][0]["allOf"][1]["properties"]["role"] == {"const": "user"}
            assert messages["items"]["allOf"][0] == {"$ref": "#/components/schemas/InputMessage"}
        assert set(operation["responses"]["202"]["content"]) == {"application/json"}
        assert set(operation["responses"]["200"]["content"]) == {"text/event-stream"}
    events = paths["/api/v1/agent/runs/{thread_id}/events"]["get"]
    assert set(events["responses"]["200"]["content"]) == {"text/event-stream"}
    assert {"400", "401", "404"} <= set(events["responses"])
    names = {(parameter["in"], parameter["name"]) for parameter in events["parameters"]}
    assert {("query", "lastEventId"), ("header", "Last-Event-ID"), ("query", "follow")} <= names


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_the_docs_pages_are_public_and_load_only_this_services_static_files(client, page):
    response = client.get(page)

    assert response.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', response.content.decode())
    static_url = "/" + settings.STATIC_URL.lstrip("/")
    assert sources
    for source in sources:
        assert source.startswith(static_url), source
        assert finders.find(source.removeprefix(static_url)), source


def test_every_operation_that_takes_a_json_body_lists_the_400_of_malformed_json(client):
    schema = schema_json(client)
    missing = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {})
            if "application/json" in body and "400" not in operation["responses"]:
                missing.append((method, path))
    assert missing == []


def test_the_spec_sets_artifact_download_is_documented_for_any_media_type(client):
    # It answers the artifact's own type (text/markdown for an answer, image/png for an
    # image: tests/agent_runs/protocols/agent_protocol/test_spec_routes.py).
    schema = schema_json(client)
    downloads = [
        operation
        for item in schema["paths"].values()
        for operation in item.values()
        if operation.get("operationId") == "ap_step_artifacts_download"
    ]
    assert len(downloads) == 1
    assert set(downloads[0]["responses"]["200"]["content"]) == {"*/*"}


def test_every_json_body_is_storable_json_and_one_that_must_hold_a_property_is_required(client):
    schema = schema_json(client)
    storable = {"$ref": "#/components/schemas/StorableJson"}
    assert schema["components"]["schemas"]["StorableJson"]["pattern"] == "^[^\\u0000]*$"
    bodies = {
        operation["operationId"]: operation["requestBody"]
        for item in schema["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "requestBody" in operation
    }
    for operation_id, body in bodies.items():
        for media_type, content in body["content"].items():
            if media_type in ("application/json", "application/*"):
                assert content["schema"]["allOf"][1] == storable, operation_id
    assert bodies["runs_create"]["required"] and bodies["attachments_create"]["required"]
    assert not bodies["ap_v1_tasks_create"].get("required")  # an empty body is a task
