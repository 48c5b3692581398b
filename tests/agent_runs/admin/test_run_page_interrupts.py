"""The admin's run page of a run that stopped on an approval (docs/admin.md, "Interrupts"):
its wait drawn after the run's last stage, pending and growing until it is answered, then
its answer and a link to the run that went on; that run's page links back to the held one.
A real worker runs both runs against the loopback model."""

import json
import re

import pytest

from agent_runs.models import Interrupt
from tests.agent_runs.admin.test_run_page import page_of, timeline_of
from tests.agent_runs.protocols.agui.test_interrupt_rules import STANDUP, Interrupted
from tests.conftest import work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def wait_row(timeline: str) -> str:
    (row,) = re.findall(r'<div class="rt-row rt-wait-row">.*?</div>\s*</div>', timeline, re.S)
    return row


def test_a_held_run_shows_its_wait_and_links_to_the_run_that_went_on(
    alice, fake_openai, redis_queue, staff_client
):
    calls = [("call_c1", "calendar_create", json.dumps(STANDUP))]
    held = Interrupted(alice, fake_openai, redis_queue, calls)
    (interrupt,) = held.interrupts

    pending = timeline_of(page_of(staff_client, held.run))
    row = wait_row(pending)
    assert "waits: calendar_create" in row and "pending ·" in row and " so far" in row
    assert "rt-wait-pending" in row and "left: 72.00%" in row
    assert 'class="rt-marker rt-waits" style="left: 72.00%"' in pending
    assert f">{interrupt.id}</a>" in pending  # the interrupts table, linked to the interrupt
    assert "rt-went-on" not in pending

    answered = alice.post(
        f"/api/v1/agent/interrupts/{interrupt.id}", {"approved": True}, format="json"
    )
    assert answered.status_code == 200
    work_burst(redis_queue)
    interrupt.refresh_from_db()
    went_on = interrupt.answered_by
    assert went_on is not None and interrupt.closed_at is not None

    closed = timeline_of(page_of(staff_client, held.run))
    row = wait_row(closed)
    assert "resolved ·" in row and "so far" not in row and "rt-wait-pending" not in row
    assert "left: 72.00%; width: 28.00%" in row  # the only wait fills the band
    link = f'<a class="rt-went-on" href="/admin/agent_runs/run/{went_on.pk}/change/">'
    assert f"{link}{went_on.run_id}</a>" in closed
    assert "{&quot;payload&quot;: {&quot;approved&quot;: true}}" in closed

    # The run that went on links back to the held run, and waited on nothing itself.
    continuing = timeline_of(page_of(staff_client, went_on))
    back = f'<a class="rt-held-run" href="/admin/agent_runs/run/{held.run.pk}/change/">'
    assert f"{back}{held.run.run_id}</a>" in continuing
    assert "rt-wait-row" not in continuing and "rt-waits" not in continuing
    assert Interrupt.objects.get(pk=interrupt.pk).status == Interrupt.Status.RESOLVED
