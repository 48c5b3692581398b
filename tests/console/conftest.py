"""The console driven in a real browser: Debian's Chromium (never a downloaded one) through
Playwright, against daphne and a real worker whose model is the loopback fake."""

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.conftest import fake_model_env, service_env, serving
from tests.fake_llm import FakeOpenAI

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
PASSWORD = "correct horse battery staple"


def chromium_path() -> str:
    """Debian's Chromium (``CHROMIUM`` overrides). Missing is a failure, not a skip: the test
    command installs it, and a console nobody drove is not tested."""
    path = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"Chromium is not at {path}: install the distribution's package "
            "(apt-get install chromium; bash .ci/test does) or point CHROMIUM at one",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium_path()
    # Playwright's sync API keeps an asyncio loop running in this thread, and Django refuses
    # ORM calls from a thread with a running loop; the tests' own ORM calls are synchronous
    # and sequential, so allow them while the browser is up (this module only).
    allowed = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright: Playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
    finally:
        playwright.stop()
        if allowed is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = allowed


@dataclass
class Served:
    """The served console: its base URL."""

    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Live(Served):
    """The served console, and the fake model steering its answers."""

    fake: FakeOpenAI
    local_dir: Path


def fake_reset(fake: FakeOpenAI) -> None:
    """The fake model as a new one answers (its server stays up for the whole module)."""
    fake.answer = ["Hello", " from", " the", " fake", " model."]
    fake.status = 200
    fake.delay = fake.chunk_delay = 0.0
    fake.reasoning = []
    fake.tool_call_turns = []
    fake.output = {"result_type": "unknown", "status": "success"}
    fake.route = {"route": "use_tools", "tools": []}
    fake.requests.clear()
    fake.worker_turns = 0


@pytest.fixture(scope="module")
def console_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """daphne (production settings: ``DJANGO_DEBUG=false``) and a worker, serving the static
    files ``collectstatic`` gathered, with the worker's and router's model on the fake."""
    local_dir = tmp_path_factory.mktemp("console-live")
    with FakeOpenAI() as fake, console_serving(local_dir, **fake_model_env(fake)) as port:
        yield Live(port=port, fake=fake, local_dir=local_dir)


@contextmanager
def console_serving(local_dir: Path, **model_env: str) -> Iterator[int]:
    """daphne and a worker in production settings, serving the static files
    ``collectstatic`` gathered into ``local_dir``, with the models ``model_env`` names; the
    daphne port."""
    env = {
        "LOCAL_DATA_DIR": str(local_dir),
        "AGENT_MODEL_MAX_RETRIES": "1",
        # The worker compiles ui_schema, and its PUBLIC_BASE_URL is not daphne's (a free
        # port chosen as daphne starts): let its images be this machine's signed URLs.
        "UI_SCHEMA_IMAGE_URL_PREFIXES": "http://127.0.0.1:",
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=settings.BASE_DIR,
        env=service_env(REDIS_URL=settings.REDIS_URL, **env),
        check=True,
    )
    with serving(**model_env, **env) as port:
        yield port


@pytest.fixture
def live(console_server: Live) -> Live:
    fake_reset(console_server.fake)
    return console_server


@pytest.fixture
def alice_user(transactional_db: None) -> Any:
    return get_user_model().objects.create_user(username="alice", password=PASSWORD)


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    created = browser.new_context(viewport={"width": 1280, "height": 800})
    yield created
    created.close()


def signed_in(context: BrowserContext, live: Served, username: str = "alice") -> Page:
    """A page of the console, signed in through its own sign-in form."""
    page = context.new_page()
    page.set_default_timeout(20_000)
    # The page's own errors, in the failing test's captured output.
    page.on("console", lambda message: print(f"console.{message.type}: {message.text}"))
    page.on("pageerror", lambda error: print(f"page error: {error}"))
    page.goto(f"{live.url}/console/")
    assert page.url.startswith(f"{live.url}/console/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live.url}/console/")
    page.wait_for_selector("#console[data-ready=true]")
    return page
