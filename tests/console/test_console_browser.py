"""The console in Debian's Chromium, driven by Playwright, against daphne and a real worker
(production settings) whose model is the loopback fake: a streamed answer, a tool call card,
an image attachment, a rendered ui_schema and its suggested action, Stop, a dropped
connection, earlier days, phone width, the keyboard and accessible names. docs/console.md."""

import json
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, Page, expect

from agent_runs.models import Message, Run, Thread
from agent_runs.services.tokens import api_token_create
from tests.attachments.images import png_bytes
from tests.conftest import wait_for
from tests.console.conftest import Live, signed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ANSWER = [
    "Your week ",
    "looks calm: ",
    "two meetings ",
    "on Tuesday, ",
    "a dentist ",
    "appointment on ",
    "Thursday, ",
    "and nothing ",
    "on Friday.",
]


def last_answer(page: Page) -> str:
    text: str = page.locator(".msg-agent .answer").last.text_content() or ""
    return text


def run_ended(page: Page) -> None:
    """The composer is back: Send shown and enabled, Stop hidden."""
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#stop")).to_be_hidden()


def send(page: Page, text: str) -> None:
    page.locator("#composer-input").fill(text)
    page.locator("#composer-input").press("Enter")


def latest_run(**filters: Any) -> Run:
    run = Run.objects.filter(**filters).order_by("-created_at").first()
    assert run is not None
    return run


def test_an_answer_streams_in_token_by_token(live: Live, alice_user: Any, context: Any) -> None:
    live.fake.answer = ANSWER
    live.fake.chunk_delay = 0.12
    page = signed_in(context, live)
    send(page, "What does my week look like?")

    # The user's message shows at once; the answer grows in several steps before the end.
    expect(page.locator(".msg-user").last).to_contain_text("What does my week look like?")
    expect(page.locator("#stop")).to_be_visible()
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while page.locator("#stop").is_visible() and time.monotonic() < deadline:
        text = last_answer(page)
        if text and (not seen or text != seen[-1]):
            seen.append(text)
        time.sleep(0.03)
    run_ended(page)
    whole = "".join(ANSWER)
    assert last_answer(page) == whole
    partial = [text for text in seen if text != whole]
    assert len(partial) >= 3, seen
    assert all(whole.startswith(text) for text in seen)

    run = latest_run(thread__owner=alice_user)
    assert run.status == Run.Status.COMPLETED
    assert Message.objects.get(run=run, role="assistant").content == whole
    # A new thread: the list shows it, titled by its first message, as the current one.
    current = page.locator(".thread-button[aria-current=true]")
    expect(current).to_contain_text("What does my week look like?")
    assert current.get_attribute("data-thread-id") == str(run.thread_id)
