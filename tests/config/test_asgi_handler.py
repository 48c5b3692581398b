"""Django behind daphne through config/asgi_handler.py: the middleware still runs (sessions,
CSRF, security headers), API errors keep their JSON, and each request gives its database
connection back to the pool (a pool of two serves many requests in a row)."""

import http.client
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from agent_runs.models import Run
from agent_runs.services.tokens import api_token_create
from tests.agent_runs.sse import read_sse
from tests.conftest import run_input, start_daphne, stop_process

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture(scope="module")
def port(django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    server, port = start_daphne(redis_url=settings.REDIS_URL, DATABASE_POOL_MAX_SIZE="2")
    yield port
    stop_process(server)


def request(port: int, method: str, path: str, body: bytes = b"", **headers: str) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        connection.close()


def cookies(answer: Answer) -> str:
    return "\n".join(answer.headers.get_all("Set-Cookie") or [])


def post_run(port: int, token: str, body: Any, content_type: str = "application/json") -> Answer:
    return request(
        port,
        "POST",
        "/api/v1/agent/runs",
        json.dumps(body).encode(),
        Authorization=f"Bearer {token}",
        **{"Content-Type": content_type},
    )


def test_a_run_is_accepted_and_the_middleware_headers_are_there(port, redis_queue):
    token = api_token_create(username="alice")
    body = run_input()

    answer = post_run(port, token, body)

    assert answer.status == 202, answer.body
    assert answer.json()["threadId"] == body["threadId"] and answer.json()["created"] is True
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware
    assert answer.headers["X-Frame-Options"] == "DENY"  # XFrameOptionsMiddleware
    assert Run.objects.filter(run_id=body["runId"]).count() == 1


def test_api_errors_keep_their_status_and_json(port, redis_queue):
    token = api_token_create(username="alice")

    anonymous = request(port, "POST", "/api/v1/agent/runs", b"{}")
    wrong_type = post_run(port, token, run_input(), content_type="text/plain")
    invalid = post_run(port, token, run_input(threadId="not-a-uuid"))
    bad_host = request(port, "GET", "/admin/login/", Host="evil.example")

    assert anonymous.status == 401 and "detail" in anonymous.json()
    assert wrong_type.status == 415 and "detail" in wrong_type.json()
    assert invalid.status == 422 and invalid.json() == {"detail": "threadId must be a valid UUID"}
    assert bad_host.status == 400  # CommonMiddleware still checks ALLOWED_HOSTS
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "path, status, error",
    [
        # Twisted parses a multipart POST itself unless told not to, and answers a body it cannot
        # parse with a bare 400 of its own: no Content-Type, no body, the application never asked.
        ("/api/v1/agent/attachments", 400, "send exactly one image in the multipart field 'file'"),
        ("/api/tasks/0/steps/0/artifacts", 404, "step not found"),
    ],
)
def test_a_malformed_multipart_body_reaches_the_application(port, path, status, error):
    token = api_token_create(username="alice")

    answer = request(
        port,
        "POST",
        path,
        b"--abc--\r\n",  # only a closing boundary
        Authorization=f"Bearer {token}",
        **{"Content-Type": "multipart/form-data; boundary=abc"},
    )

    assert answer.status == status, answer.body
    assert answer.headers["Content-Type"] == "application/json"
    assert error in answer.body.decode()


def test_an_admin_logs_in_with_a_session_and_a_csrf_token(port):
    get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-12345!")

    form = request(port, "GET", "/admin/login/")
    csrf_cookie = re.search(r"csrftoken=([^;]+)", cookies(form))
    assert form.status == 200 and csrf_cookie
    csrf = csrf_cookie.group(1)
    fields = {"username": "staff", "password": "pw-12345!", "csrfmiddlewaretoken": csrf}
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}"}
    forged = request(
        port,
        "POST",
        "/admin/login/",
        urlencode({**fields, "csrfmiddlewaretoken": "x" * 32}).encode(),
        **headers,
    )
    login = request(port, "POST", "/admin/login/", urlencode(fields).encode(), **headers)
    session = re.search(r"sessionid=([^;]+)", cookies(login))
    assert session
    index = request(port, "GET", "/admin/", Cookie=f"sessionid={session.group(1)}")

    assert forged.status == 403  # the CSRF middleware ran
    assert login.status == 302
    assert index.status == 200 and b"Site administration" in index.body


def test_requests_give_their_database_connection_back_to_the_pool(port, redis_queue):
    token = api_token_create(username="alice")
    bodies = [run_input() for _ in range(24)]

    # From 4 clients at once, on a pool of two connections (and two request threads).
    with ThreadPoolExecutor(max_workers=4) as clients:
        answers = list(clients.map(lambda body: post_run(port, token, body), bodies))
    # An event stream reads on other threads: had the request threads kept their
    # connections, it would wait for the pool's 10 s timeout, and fail.
    started = time.monotonic()
    stream = read_sse(port, bodies[0]["threadId"], token=token, max_frames=1, timeout=8)

    assert [answer.status for answer in answers] == [202] * 24
    assert Run.objects.count() == 24
    assert stream.status == 200 and time.monotonic() - started < 5
