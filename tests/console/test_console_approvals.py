"""Approvals in the console (docs/console.md, Approvals), as a newcomer meets them: the offline
demo model asked for ``/tool calendar_create {…}`` in chat mode, where the calendar's writes
wait for approval. Chromium against daphne and a real worker (production settings): the card
with the tool and its arguments, the message box saying the thread waits, a new message
refused with the server's words, the card again after a reload, Approve by keyboard (the
calendar event made) and Reject (nothing made). (Parallel approvals need a model that makes
parallel calls: test_console_parallel_approvals.py, whose worker is not this module's.)"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from agent_runs.models import CalendarEvent, Interrupt, Run
from tests.conftest import DEMO
from tests.console.conftest import Served, console_serving, signed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}
ASK = f"/tool calendar_create {json.dumps(STANDUP)}"


@pytest.fixture(scope="module")
def demo_console(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The console served with every stage on the offline demo model, as the quick start
    serves it."""
    with console_serving(tmp_path_factory.mktemp("console-demo"), **DEMO) as port:
        yield Served(port=port)


def send(page: Page, text: str) -> None:
    page.locator("#composer-input").fill(text)
    page.locator("#composer-input").press("Enter")


def run_ended(page: Page) -> None:
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#stop")).to_be_hidden()


def pending_card(page: Page, alice_user: Any) -> tuple[Any, Interrupt]:
    """The one approval card shown, checked against the stored pending interrupt."""
    card = page.locator(".approval-card")
    expect(card).to_have_count(1)
    expect(card.locator(".approval-title")).to_have_text("Approval needed: calendar_create")
    assert json.loads(card.locator(".approval-args").text_content() or "") == STANDUP
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    expect(card.get_by_role("button", name="Reject")).to_be_enabled()
    expect(page.locator("#composer-waiting")).to_be_visible()
    interrupt = Interrupt.objects.get(thread__owner=alice_user, status=Interrupt.Status.PENDING)
    assert card.get_attribute("data-interrupt-id") == interrupt.id
    return card, interrupt


def test_an_approval_is_a_card_that_survives_a_reload_and_approve_by_keyboard_runs_the_tool(
    demo_console: Served, alice_user: Any, context: BrowserContext
) -> None:
    page = signed_in(context, demo_console)
    send(page, ASK)

    # The run stops on the call: its tool card waits, and the approval card takes the focus.
    card, interrupt = pending_card(page, alice_user)
    expect(card).to_be_focused()
    expect(page.locator(".tool-card .tool-status")).to_have_text("Waiting for approval")
    run_ended(page)
    assert interrupt.tool_name == "calendar_create" and interrupt.arguments == STANDUP
    assert not CalendarEvent.objects.exists()
    # A new message meanwhile is refused, in the server's words.
    send(page, "Are you there?")
    refused = page.locator(".msg-agent .inline-error").last
    expect(refused).to_contain_text(f"thread has an open interrupt: {interrupt.id}")
    run_ended(page)

    # Reloaded, the thread shows the same pending approval, focused.
    page.reload()
    page.wait_for_selector("#console[data-ready=true]")
    card, again = pending_card(page, alice_user)
    assert again.id == interrupt.id
    expect(card).to_be_focused()

    # Tab reaches Approve; Enter answers, and the run that resumes runs the tool.
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Enter")
    expect(card.locator(".approval-outcome")).to_have_text("Approved.")
    expect(card.get_by_role("button", name="Approve")).to_be_disabled()
    answer = page.locator(".msg-agent .answer").last
    expect(answer).to_contain_text("(demo model) The tool answered:")
    run_ended(page)
    expect(page.locator("#composer-waiting")).to_be_hidden()
    expect(page.locator(".tool-card .tool-status").last).to_have_text("Succeeded")

    event = CalendarEvent.objects.get(owner=alice_user)
    assert event.title == "Standup" and event.event_timezone == "UTC"
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.RESOLVED
    assert interrupt.answer is not None and interrupt.answer["payload"] == {"approved": True}
    resumed = interrupt.answered_by
    assert resumed is not None and resumed.run_id.startswith("console-")
    assert resumed.status == Run.Status.COMPLETED
    assert event.run_id == resumed.pk
    # Answered, the approval is gone after a reload, and the thread takes messages again.
    page.reload()
    page.wait_for_selector("#console[data-ready=true]")
    expect(page.locator(".msg-agent .answer").last).to_contain_text("The tool answered:")
    expect(page.locator(".approval-card")).to_have_count(0)
    expect(page.locator("#composer-waiting")).to_be_hidden()


def test_reject_declines_the_call_and_nothing_is_made(
    demo_console: Served, alice_user: Any, context: BrowserContext
) -> None:
    page = signed_in(context, demo_console)
    send(page, ASK)
    card, interrupt = pending_card(page, alice_user)
    run_ended(page)

    card.get_by_role("button", name="Reject").click()

    expect(card.locator(".approval-outcome")).to_have_text("Rejected.")
    # The run that resumes answers with the call declined: its card says so, nothing is made.
    resumed = page.locator(".msg-agent").last
    expect(resumed.locator(".answer")).to_contain_text("You declined the tool call")
    run_ended(page)
    declined = resumed.locator(".tool-card")
    expect(declined.locator(".tool-name")).to_have_text("calendar_create")
    expect(declined.locator(".tool-status")).to_have_text("Failed")
    expect(declined.locator(".tool-result")).to_contain_text("The user declined this call")
    expect(page.locator("#composer-waiting")).to_be_hidden()
    assert not CalendarEvent.objects.exists()
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.RESOLVED
    assert interrupt.answer is not None and interrupt.answer["payload"] == {"approved": False}
