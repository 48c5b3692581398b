"""Rate limits per user on creating runs (docs/operations.md, "Rate limits"): runs per window
(``RATE_LIMIT_RUNS``, a moving window in the real Redis) and runs active at once
(``MAX_ACTIVE_RUNS_PER_USER``), each a 429 with ``Retry-After`` in every protocol's shape,
nothing written; a retry of a run answers it whatever the limits say; streams are not
limited; Redis unreachable, the window fails open and is counted in the metrics."""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2  # the openai SDK's own httpx
import openai
import pytest
from django.core.wsgi import get_wsgi_application

from agent_runs import metrics
from agent_runs.models import Run
from agent_runs.services import rate_limits
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def limits_set(settings: Any, redis_queue: Any) -> Iterator[Any]:
    """The limits read anew from the settings each test sets (and the window emptied)."""
    rate_limits.runs_window.cache_clear()
    rate_limits._limiter.cache_clear()
    redis_queue.connection.flushdb()
    yield settings
    rate_limits.runs_window.cache_clear()
    rate_limits._limiter.cache_clear()


def test_runs_over_the_window_are_refused_with_retry_after(alice, bob, limits_set):
    limits_set.RATE_LIMIT_RUNS = "2/minute"
    first, second, third = (post_run(alice, run_input()) for _ in range(3))

    assert [first.status_code, second.status_code] == [202, 202]
    assert third.status_code == 429
    assert third.json() == {"detail": "rate limit: at most 2 runs per 1 minute"}
    assert 1 <= int(third["Retry-After"]) <= 60
    assert Run.objects.count() == 2
    # Per user: bob's own window is untouched.
    assert post_run(bob, run_input()).status_code == 202


def test_runs_active_at_once_are_limited_and_a_retry_is_answered(alice, limits_set):
    limits_set.MAX_ACTIVE_RUNS_PER_USER = 1
    body = run_input()
    assert post_run(alice, body).status_code == 202  # queued: no worker runs it

    over = post_run(alice, run_input())
    retry = post_run(alice, body)

    assert over.status_code == 429
    assert over.json() == {"detail": "too many runs at once: at most 1 queued, running or waiting"}
    assert over["Retry-After"] == "5"
    assert retry.status_code == 202 and retry.json()["runId"] == body["runId"]
    assert Run.objects.count() == 1
    # Once it ended, the next is taken.
    Run.objects.update(status=Run.Status.COMPLETED)
    assert post_run(alice, run_input()).status_code == 202


def test_every_protocol_refuses_in_its_shape_with_retry_after(alice, alice_token, limits_set):
    limits_set.MAX_ACTIVE_RUNS_PER_USER = 1
    assert post_run(alice, run_input()).status_code == 202
    detail = "too many runs at once: at most 1 queued, running or waiting"
    # The openai SDK, unmodified, on this process's own app (the limits are this test's).
    in_process = httpx2.Client(transport=httpx2.WSGITransport(app=get_wsgi_application()))

    with pytest.raises(openai.RateLimitError) as raised:
        openai.OpenAI(
            base_url="http://testserver/openai/v1",
            api_key=alice_token,
            max_retries=0,
            http_client=in_process,
        ).responses.create(model="agent", input="hi")
    agent_api = alice.post(
        "/api/v1/agent/process",
        {"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        format="json",
    )
    spec_task = alice.post("/api/tasks", {"task": "hi"}, format="json")
    v1_task = alice.post("/ap/v1/agent/tasks", {"input": "hi"}, format="json")
    hello = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    a2a = alice.post(
        "/a2a",
        {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": hello}},
        format="json",
        HTTP_A2A_VERSION="1.0",
    )

    assert raised.value.status_code == 429 and detail in str(raised.value)
    assert raised.value.response.headers["retry-after"] == "5"
    refused = (agent_api, spec_task, v1_task, a2a)
    assert [answer.status_code for answer in refused] == [429] * 4
    assert {answer["Retry-After"] for answer in refused} == {"5"}
    assert agent_api.json()["error"] == {"code": "rate_limited", "message": detail}
    assert detail in json.dumps(spec_task.json()) and detail in json.dumps(v1_task.json())
    assert a2a.json()["id"] == 7 and a2a.json()["error"]["message"] == detail
    assert a2a.json()["error"]["code"] == -32600
    assert Run.objects.count() == 1
    # Reading is never limited.
    thread_id = Run.objects.get().thread_id
    assert alice.get("/api/v1/agent/threads").status_code == 200
    assert alice.get(f"/api/v1/agent/threads/{thread_id}/runs").status_code == 200


def test_an_unreachable_redis_lets_runs_through_and_is_counted(alice, limits_set):
    limits_set.RATE_LIMIT_RUNS = "1/minute"
    limits_set.RATE_LIMIT_STORAGE_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    before = metrics.RATE_LIMITER_UNAVAILABLE._value.get()

    answers = [post_run(alice, run_input()).status_code for _ in range(3)]

    assert answers == [202, 202, 202]
    assert metrics.RATE_LIMITER_UNAVAILABLE._value.get() == before + 3
