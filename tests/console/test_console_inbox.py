"""The console's approvals inbox (docs/console.md, "The approvals inbox"): the header counts the
approvals waiting for the signed-in user across threads, updated as a run stops on one and
as one is answered (here, or on another device once the page is looked at again); opened, it
lists them, and one picked opens its thread with its card. Another user's approval is never
counted. Chromium against daphne and a real worker, every stage on the offline demo model."""

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import BrowserContext, Page, expect

from agent_runs.models import Interrupt, Run, Thread
from agent_runs.services.interrupts import interrupt_answer
from tests.conftest import DEMO
from tests.console.conftest import Served, console_serving, signed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}
RETRO = {**STANDUP, "title": "Retro"}


@pytest.fixture(scope="module")
def demo_console(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with console_serving(tmp_path_factory.mktemp("console-inbox"), **DEMO) as port:
        yield Served(port=port)


def ask(page: Page, arguments: dict[str, Any]) -> None:
    page.locator("#composer-input").fill(f"/tool calendar_create {json.dumps(arguments)}")
    page.locator("#composer-input").press("Enter")
    expect(page.locator(".approval-card")).to_have_count(1)
    expect(page.locator("#send")).to_be_enabled()


def bobs_pending_approval() -> Interrupt:
    """A stranger's approval, waiting: the inbox must never count it."""
    bob = get_user_model().objects.create_user(username="bob")
    thread = Thread.objects.create(owner=bob)
    run = Run.objects.create(
        thread=thread,
        run_id="bob-run",
        status=Run.Status.COMPLETED,
        runtime_mode=Run.RuntimeMode.CHAT,
        input={},
        input_sha256="0" * 64,
    )
    return Interrupt.objects.create(
        id="int-bob",
        thread=thread,
        run=run,
        kind=Interrupt.Kind.APPROVAL,
        reason="tool_approval",
        tool_call_id="call_bob",
        tool_name="calendar_delete",
        expires_at=timezone.now() + timedelta(days=1),
    )


def test_the_inbox_counts_lists_and_opens_the_approvals_waiting_across_threads(
    demo_console: Served, alice_user: Any, context: BrowserContext
) -> None:
    bobs_pending_approval()
    page = signed_in(context, demo_console)
    toggle = page.locator("#inbox-toggle")
    count = page.locator("#inbox-count")
    expect(toggle).to_have_accessible_name("Approvals: none pending")
    expect(count).to_be_hidden()

    # A run that stops on an approval counts at once; a second thread's adds one.
    ask(page, STANDUP)
    expect(count).to_have_text("1")
    expect(toggle).to_have_accessible_name("Approvals: 1 pending")
    standup = Interrupt.objects.get(thread__owner=alice_user, arguments=STANDUP)
    page.locator("#new-thread").click()
    ask(page, RETRO)
    expect(count).to_have_text("2")
    retro = Interrupt.objects.get(thread__owner=alice_user, arguments=RETRO)
    assert standup.thread_id != retro.thread_id

    # Opened, it lists both, newest first, focused; the older one opens the Standup thread.
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    items = page.locator("#inbox-list .inbox-item")
    expect(items).to_have_count(2)
    assert [items.nth(n).get_attribute("data-interrupt-id") for n in range(2)] == [
        retro.id,
        standup.id,
    ]
    expect(items.first).to_be_focused()
    expect(items.nth(1).locator(".inbox-tool")).to_have_text("Approve calendar_create?")
    expect(items.nth(1).locator(".inbox-thread")).to_contain_text("/tool calendar_create")
    items.nth(1).click()
    expect(page.locator("#inbox-panel")).to_be_hidden()
    card = page.locator(".approval-card")
    expect(card).to_have_attribute("data-interrupt-id", standup.id)
    expect(card).to_be_focused()

    # Answered here: the count goes down as soon as the answer is accepted.
    card.get_by_role("button", name="Approve").click()
    expect(count).to_have_text("1")
    expect(page.locator(".msg-agent .answer").last).to_contain_text("The tool answered:")
    expect(count).to_have_text("1")

    # Answered on another device: the page reads the count again when it is looked at again.
    interrupt_answer(user=alice_user, interrupt_id=retro.id, payload={"approved": False})
    expect(count).to_have_text("1")
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(count).to_be_hidden()
    expect(toggle).to_have_accessible_name("Approvals: none pending")
    toggle.click()
    expect(page.locator("#inbox-list .inbox-item")).to_have_count(0)
    expect(page.locator("#inbox-empty")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#inbox-panel")).to_be_hidden()
    expect(toggle).to_be_focused()
