import uuid
from collections.abc import Callable, Iterator
from typing import Any

import django_rq
import pytest
from django.conf import settings
from django.db import connection
from django.test import TestCase
from rest_framework.test import APIClient

from agent_runs.services import api_token_create


@pytest.fixture(autouse=True, scope="session")
def _real_services_only(django_db_setup: Any, django_db_blocker: Any) -> None:
    """The suite runs on PostgreSQL and a real Redis, never on stand-ins."""
    with django_db_blocker.unblock():
        assert connection.vendor == "postgresql", "set DATABASE_URL to a PostgreSQL database"
    assert not settings.REDIS_URL.startswith("unix://"), "set REDIS_URL to a Redis server"


@pytest.fixture
def redis_queue() -> Iterator[Any]:
    queue = django_rq.get_queue(settings.AGENT_RUNS_QUEUE)
    queue.connection.flushdb()
    yield queue
    queue.connection.flushdb()


@pytest.fixture
def alice_token(db: None) -> str:
    return api_token_create(username="alice")


@pytest.fixture
def bob_token(db: None) -> str:
    return api_token_create(username="bob")


@pytest.fixture
def alice(alice_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice_token}")
    return client


@pytest.fixture
def bob(bob_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bob_token}")
    return client


def run_input(**overrides: Any) -> dict[str, Any]:
    """A valid RunAgentInput (spec/run-agent-input.md, Request Example), camelCase."""
    body: dict[str, Any] = {
        "threadId": str(uuid.uuid4()),
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "state": {},
        "messages": [{"id": "msg-001", "role": "user", "content": "What is on my calendar?"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"runtime_mode": "chat"},
    }
    body.update(overrides)
    return body


def post_run(client: APIClient, body: Any) -> Any:
    return send(lambda: client.post("/api/v1/agent/runs", body, format="json"))


def send(request: Callable[[], Any]) -> Any:
    """Make a request and run its on-commit callbacks (the enqueue) as a real commit would,
    also inside the test's wrapping transaction."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return request()
