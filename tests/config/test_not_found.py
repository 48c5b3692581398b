"""What no view answers, over a real daphne in production and in debug mode: ``/`` is the
console; under an API prefix, a path no route matches and a method a route does not take are
the protocol's JSON 404 and 405; elsewhere a missing page is Django's."""

import http.client
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from agent_runs.services.tokens import api_token_create
from tests.conftest import free_port, service_env, stop_process, wait_for_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module", params=["false", "true"], ids=["production", "debug"])
def port(request: Any, django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    server, port = start_daphne_in_mode(debug=request.param)
    yield port
    stop_process(server)


def start_daphne_in_mode(*, debug: str) -> tuple[subprocess.Popen[bytes], int]:
    """daphne as tests/conftest.py starts it, with ``DJANGO_DEBUG`` set to ``debug`` (the
    quick start's is ``true``)."""
    port = free_port()
    env = service_env(REDIS_URL=settings.REDIS_URL, DJANGO_ALLOWED_HOSTS="127.0.0.1")
    env["DJANGO_DEBUG"] = debug
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "config.asgi:application"], cwd=settings.BASE_DIR, env=env)
    wait_for_port(port, server)
    return server, port


def ask(port: int, method: str, path: str, **headers: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    connection.request(method, path, body=b"{}" if method != "GET" else None, headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def answer(port: int, method: str, path: str, **headers: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        body = b"{}" if method != "GET" else None
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        content = response.read()
        assert response.headers["Content-Type"] == "application/json", content[:200]
        return response.status, json.loads(content)
    finally:
        connection.close()


def detail(body: Any) -> bool:
    return set(body) == {"detail"}


def agent_protocol(body: Any) -> bool:
    return set(body) == {"error", "message"} and isinstance(body["error"], str)


def agent_api(body: Any) -> bool:
    return set(body) == {"error"} and set(body["error"]) == {"code", "message"}


def openai(body: Any) -> bool:
    return set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}


def json_rpc(body: Any) -> bool:
    return body["jsonrpc"] == "2.0" and body["error"]["code"] == -32600


@pytest.mark.parametrize(
    "method, path, shape",
    [
        ("GET", "/api/v1/agent/threads/not-a-uuid", detail),
        ("GET", "/api/v1/agent/runs/not-a-uuid/events", detail),
        ("GET", "/api/v1/agent/nothing-here", detail),
        ("GET", "/api/nothing-here", detail),
        ("GET", "/storage/v1/object/elsewhere", detail),
        ("GET", "/api/tasks/0/nothing-here", agent_protocol),
        ("POST", "/ap/v1/agent/nothing-here", agent_protocol),
        ("GET", "/api/v1/agent/process/0/nothing-here", agent_api),
        ("GET", "/openai/v1/models", openai),
        ("POST", "/openai/v1/chat/completions", openai),
        ("POST", "/a2a/nothing-here", json_rpc),
    ],
)
def test_an_unrouted_api_path_is_the_protocol_s_json_404(port, method, path, shape):
    status, body = answer(port, method, path)

    assert status == 404
    assert shape(body), body


@pytest.mark.parametrize(
    "method, path, shape",
    [
        ("PUT", "/api/v1/agent/threads", detail),
        ("POST", f"/api/v1/agent/runs/{uuid.uuid4()}/events", detail),
        ("PUT", "/storage/v1/object/sign/agent-inputs/a.png", detail),
        ("PATCH", "/api/tasks", agent_protocol),
        ("DELETE", "/ap/v1/agent/tasks", agent_protocol),
        ("GET", "/api/v1/agent/process", agent_api),
        ("DELETE", "/openai/v1/responses", openai),
        ("GET", "/a2a", json_rpc),
    ],
)
def test_a_method_a_route_does_not_take_is_the_protocol_s_json_405(port, method, path, shape):
    token = api_token_create(username="alice")

    status, body = answer(port, method, path, Authorization=f"Bearer {token}")

    assert status == 405
    assert shape(body), body


def test_a_page_slash_less_is_redirected_to_its_slash(port):
    response = ask(port, "GET", "/api/docs")

    assert response.status == 301
    assert response.headers["Location"] == "/api/docs/"


def test_the_root_is_the_console(port):
    response = ask(port, "GET", "/")

    assert response.status == 302
    assert response.headers["Location"] == "/console/"


def test_an_unrouted_page_elsewhere_keeps_django_s_404(port):
    response = ask(port, "GET", "/no-such-page")

    assert response.status == 404
    assert response.headers["Content-Type"].startswith("text/html")


def test_the_admin_s_view_site_link_is_the_console(admin_client):
    response = admin_client.get("/admin/")

    assert response.status_code == 200
    assert b'<a href="/console/">View site</a>' in response.content
