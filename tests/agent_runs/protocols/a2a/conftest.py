"""The A2A edge's live fixtures: daphne (its ``PUBLIC_BASE_URL`` its own address, so the
agent card's interface URL reaches it) and a real worker, with the demo model or a loopback
model server the test steers."""

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import free_port, service_env, start_worker, stop_process, wait_for_port
from tests.fake_llm import FakeOpenAI

DEMO = {"AGENT_WORKER_MODEL": "demo", "AGENT_ROUTER_MODEL": "demo", "AGENT_MEMORY_MODEL": "demo"}


def start_daphne_public(**env: str) -> tuple[subprocess.Popen[bytes], int]:
    """daphne as ``conftest.start_daphne`` starts it, on a port known beforehand so that
    ``PUBLIC_BASE_URL`` (the card's interface URL) names it."""
    port = free_port()
    env = service_env(
        REDIS_URL=settings.REDIS_URL,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        AGENT_SSE_KEEPALIVE_SECONDS="0.3",
        PUBLIC_BASE_URL=f"http://127.0.0.1:{port}",
        **env,
    )
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "config.asgi:application"], cwd=settings.BASE_DIR, env=env)
    wait_for_port(port, server)
    return server, port


@contextmanager
def serving(**env: str) -> Iterator[int]:
    """daphne and a real worker on the test database and Redis; the daphne port."""
    server, port = start_daphne_public(**env)
    worker = start_worker(**env)
    try:
        yield port
    finally:
        stop_process(worker)
        stop_process(server)


@pytest.fixture
def port(redis_queue: Any) -> Iterator[int]:
    """The demo model in every stage."""
    with serving(**DEMO) as port:
        yield port


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """The router's and the worker's model on a loopback server the test steers."""
    with FakeOpenAI() as fake:
        env = {
            **DEMO,
            "AGENT_WORKER_MODEL": "openai/gpt-test",
            "AGENT_ROUTER_MODEL": "openai/gpt-test",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test",
        }
        with serving(**env) as port:
            fake.port = port  # type: ignore[attr-defined]  # the test's handle on the server
            yield fake
        fake.delay = 0
