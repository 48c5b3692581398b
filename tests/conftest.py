import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import django_rq
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import TestCase
from rest_framework.test import APIClient

from agent_runs.services.tokens import api_token_create
from tests.fake_llm import FakeOpenAI


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


def work_burst(queue: Any) -> None:
    """Run a real worker until the queue is empty (in this process: it runs jobs in its own)."""
    from agent_runs.runtime.worker import RunWorker

    connections.close_all()
    RunWorker([queue], connection=queue.connection).work(burst=True)


def run_input(**overrides: Any) -> dict[str, Any]:
    """A valid RunAgentInput (docs/spec/run-agent-input.md, Request Example), camelCase."""
    body: dict[str, Any] = {
        "threadId": str(uuid.uuid4()),
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "state": {},
        # A new message each time: a thread refuses a user message id it already has.
        "messages": [
            {
                "id": f"msg-{uuid.uuid4().hex[:12]}",
                "role": "user",
                "content": "What is on my calendar?",
            }
        ],
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


@pytest.fixture(scope="session")
def daphne_port(django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    """A real daphne serving the project on the test database and Redis."""
    server, port = start_daphne(redis_url=settings.REDIS_URL)
    yield port
    stop_process(server)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(predicate: Callable[[], Any], seconds: float = 20.0) -> None:
    """Wait until ``predicate()`` holds (a run's status, a request reaching a model)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60  # a busy machine starts it slowly
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"{process.args!r} did not start") from None
            time.sleep(0.05)


def service_env(**overrides: str) -> dict[str, str]:
    """The environment of a service process the tests start: the test database, production
    mode, the test's secret key, and ``overrides``."""
    database = settings.DATABASES["default"]
    return dict(
        os.environ,
        DATABASE_URL=(
            f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        **overrides,
    )


def start_daphne(
    port: int | None = None, /, *, redis_url: str, **env_overrides: str
) -> tuple[subprocess.Popen[bytes], int]:
    """daphne on ``port`` (a free one unless given), its ``PUBLIC_BASE_URL`` its own address
    (so that URLs it publishes, the A2A card's, reach it) unless the test's environment
    names one."""
    port = port or free_port()
    env = service_env(
        **{
            "REDIS_URL": redis_url,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "AGENT_SSE_KEEPALIVE_SECONDS": "0.3",
            "PUBLIC_BASE_URL": os.environ.get("PUBLIC_BASE_URL", f"http://127.0.0.1:{port}"),
            **env_overrides,
        }
    )
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "config.asgi:application"], cwd=settings.BASE_DIR, env=env)
    wait_for_port(port, server)
    return server, port


# Every stage on the offline demo model.
DEMO = {"AGENT_WORKER_MODEL": "demo", "AGENT_ROUTER_MODEL": "demo", "AGENT_MEMORY_MODEL": "demo"}


def fake_model_env(fake: FakeOpenAI, *, router: bool = True) -> dict[str, str]:
    """The worker's model on ``fake``, and the router's unless ``router`` is false (the
    memory stage's, and the others', the demo's)."""
    return {
        **DEMO,
        "AGENT_WORKER_MODEL": "openai/gpt-test",
        **({"AGENT_ROUTER_MODEL": "openai/gpt-test"} if router else {}),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-test",
    }


@contextmanager
def serving(**env: str) -> Iterator[int]:
    """daphne and a real worker on the test database and Redis; the daphne port."""
    server, port = start_daphne(redis_url=settings.REDIS_URL, **env)
    worker = start_worker(**env)
    try:
        yield port
    finally:
        stop_process(worker)
        stop_process(server)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_worker(**env_overrides: str) -> subprocess.Popen[bytes]:
    """A real `rqworker` process on the test database and Redis (for tests that need a job
    running while the test acts)."""
    env = service_env(**{"REDIS_URL": settings.REDIS_URL, **env_overrides})
    command = [sys.executable, "manage.py", "rqworker", settings.AGENT_RUNS_QUEUE]
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env)


def start_model_worker(model: Any, **env_overrides: str) -> subprocess.Popen[bytes]:
    """``start_worker`` with every stage on the loopback model ``model`` (a ``FakeOpenAI``)."""
    return start_worker(
        AGENT_ROUTER_MODEL="openai/gpt-test",
        AGENT_WORKER_MODEL="openai/gpt-test",
        AGENT_MEMORY_MODEL="openai/gpt-test",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test",
        **env_overrides,
    )


@pytest.fixture
def staff_client(client: Any) -> Any:
    """Django's test client signed in as a superuser (the admin's pages)."""
    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-12345!")
    client.force_login(staff)
    return client


@pytest.fixture
def fake_openai(settings: Any) -> Iterator[Any]:
    """The worker's model is ``openai/gpt-test`` on a loopback OpenAI-compatible server."""
    from tests.fake_llm import FakeOpenAI

    with FakeOpenAI() as fake:
        settings.AGENT_WORKER_MODEL = "openai/gpt-test"
        settings.OPENAI_BASE_URL = fake.base_url
        settings.OPENAI_API_KEY = "sk-test"
        settings.AGENT_MODEL_MAX_RETRIES = 1
        settings.AGENT_MODEL_RETRY_DELAY_SECONDS = 0
        yield fake


@pytest.fixture
def attachment_root(settings: Any, tmp_path: Path) -> Path:
    """The attachments storage, on a directory of this test's own."""
    root = tmp_path / "attachments"
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": root},
        },
    }
    return root


@pytest.fixture
def alice_image_url(alice: APIClient, attachment_root: Any) -> Callable[[], str]:
    """Uploads a PNG of alice's and gives its signed URL, once per call."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.attachments.images import png_bytes

    def upload() -> str:
        file = SimpleUploadedFile("a.png", png_bytes(), content_type="image/png")
        response = alice.post("/api/v1/agent/attachments", {"file": file}, format="multipart")
        assert response.status_code == 201, response.content
        url: str = response.json()["url"]
        return url

    return upload


@pytest.fixture
def tools_without_approval(tmp_path: Any, settings: Any, monkeypatch: Any) -> Iterator[None]:
    """The chat runs' tools as shipped, with no call waiting for approval (the calendar's
    writes run at once), for tests of what the tools do."""
    from agent_runs.agent_config import system_agents

    config = tmp_path / "system_agents_no_approval.yaml"
    shipped = system_agents()
    config.write_text(
        json.dumps(
            {
                "agents": {
                    stage: {
                        "enabled_tools": [
                            {"name": name, "requires_approval": False}
                            for name in agent.enabled_tools
                        ],
                        "context": agent.context,
                    }
                    for stage, agent in shipped.agents.items()
                },
                "tools": shipped.tools,
            }
        )
    )
    settings.AGENT_SYSTEM_AGENTS_FILE = str(config)
    monkeypatch.setenv("AGENT_SYSTEM_AGENTS_FILE", str(config))  # and a worker process's
    system_agents.cache_clear()
    yield
    system_agents.cache_clear()
