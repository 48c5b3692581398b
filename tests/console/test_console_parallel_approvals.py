"""Parallel approvals in the console (docs/console.md, Approvals): the loopback fake model
makes two calls of a tool that requires approval at once; each gets its card, and one run
answers both once each has its answer (AG-UI 1.0: one resume answers every open interrupt).
A module of its own: its server's worker must not share the queue with the demo model's of
test_console_approvals.py."""

import json
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from agent_runs.models import CalendarEvent, Interrupt, Run
from tests.console.conftest import Live, signed_in
from tests.console.test_console_approvals import STANDUP, run_ended, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_parallel_approvals_are_answered_together_once_each_has_its_answer(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    retro = {**STANDUP, "title": "Retro"}
    live.fake.route = {"route": "use_tools", "tools": ["calendar_create"]}
    live.fake.tool_call_turns = [
        [
            ("call_s", "calendar_create", json.dumps(STANDUP)),
            ("call_r", "calendar_create", json.dumps(retro)),
        ]
    ]
    live.fake.answer = ["Standup is in; the retro is not."]
    page = signed_in(context, live)
    send(page, "Put a standup and a retro in my calendar")

    cards = page.locator(".approval-card")
    expect(cards).to_have_count(2)
    run_ended(page)
    shown = [json.loads(text) for text in cards.locator(".approval-args").all_text_contents()]
    assert shown == [STANDUP, retro]
    expect(cards.first).to_be_focused()
    runs = Run.objects.count()

    # One answer of two: the card says it waits for the other, and no run starts.
    cards.first.get_by_role("button", name="Approve").click()
    expect(cards.first.locator(".approval-outcome")).to_have_text(
        "Approved: answer the other approvals to go on."
    )
    expect(page.locator("#composer-waiting")).to_be_visible()
    assert Run.objects.count() == runs
    cards.last.get_by_role("button", name="Reject").click()

    expect(cards.last.locator(".approval-outcome")).to_have_text("Rejected.")
    expect(page.locator(".msg-agent .answer").last).to_have_text("Standup is in; the retro is not.")
    run_ended(page)
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
    answers = dict(Interrupt.objects.values_list("tool_call_id", "answer__payload__approved"))
    assert answers == {"call_s": True, "call_r": False}
    (answering,) = set(Interrupt.objects.values_list("answered_by__run_id", flat=True))
    assert Run.objects.count() == runs + 1 and answering.startswith("console-")
