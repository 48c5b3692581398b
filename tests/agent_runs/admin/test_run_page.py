"""The admin's run page shows real runs, executed by a real worker against the loopback
model, as a timeline: stages, tool calls, model calls, TTFT and the terminal event; the raw
events stay below."""

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from agent_runs.models import CalendarEvent, Run, RunEvent
from billing.models import UsageRecord
from billing.selectors import format_cost
from tests.agent_runs.services.test_run_cancel import cancel
from tests.billing.conftest import price_entry
from tests.conftest import post_run, run_input, start_worker, stop_process, wait_for, work_burst
from tests.fake_llm import FakeOpenAI

# The runs shown call the calendar's tools, which here run at once (no approval).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.usefixtures("tools_without_approval"),
]

MODEL = "openai/gpt-test"
ARGUMENTS = {"title": "Dentist", "start": "2026-03-17T09:00"}


@pytest.fixture
def priced_model(fake_openai, settings):
    """The router and the worker on the loopback model, with a catalog price."""
    settings.AGENT_ROUTER_MODEL = MODEL
    price_entry(MODEL, (None, "0.0000005", "0.0000015", None))
    return fake_openai


def page_of(client, run):
    response = client.get(f"/admin/agent_runs/run/{run.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def timeline_of(page):
    """The timeline section of a run page (everything above the run's fields)."""
    return page[page.index('<section class="run-timeline"') : page.index("</section>")]


def priced_total(records):
    costs = [record.cost for record in records]
    assert None not in costs
    return sum((cost for cost in costs if cost is not None), Decimal(0))


def run_with_a_tool_call(alice, redis_queue, model):
    model.tool_call_turns = [[("call_1", "calendar_create", json.dumps(ARGUMENTS))]]
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    return run


def test_the_run_page_shows_a_real_run_as_a_timeline(
    alice, redis_queue, priced_model, staff_client
):
    run = run_with_a_tool_call(alice, redis_queue, priced_model)
    page = page_of(staff_client, run)
    timeline = timeline_of(page)

    # Header: the status, the terminal event, the usage and its cost in its currency.
    assert "rt-status-completed" in timeline and ">Completed<" in timeline
    assert "<dt>Terminal event</dt><dd>RUN_FINISHED</dd>" in timeline
    records = list(UsageRecord.objects.filter(run=run).order_by("created_at"))
    assert [r.stage for r in records] == ["router", "worker", "worker"]
    assert f"{format_cost(priced_total(records))} USD (catalog_fallback, 3 calls)" in timeline
    assert "<dd>48 <span" in timeline  # tokens: 3 calls of 16

    # A bar per stage, with its duration in text.
    for stage in ("router", "worker", "memory"):
        assert re.search(
            rf'<span class="rt-name">{stage}</span> <span class="rt-dur">[\d.]+ m?s<', timeline
        )
    assert timeline.count('<div class="rt-row rt-stage-row">') == 3

    # The tool call, with its arguments, its result and its status.
    created = CalendarEvent.objects.get()
    assert "tool calendar_create" in timeline
    assert escape(json.dumps(ARGUMENTS, indent=2, sort_keys=True)) in timeline
    assert f"&quot;id&quot;: {created.pk}" in timeline  # the result the tool gave
    assert '<td class="rt-ok">success</td>' in timeline

    # Each model call: model, stage, tokens, latency, cost.
    for record in records:
        assert record.cost is not None and record.latency_ms is not None
        assert f"{record.latency_ms} ms</td>" in timeline
        assert f"{format_cost(record.cost)} USD</td>" in timeline
    assert timeline.count(f"<td><code>{MODEL}</code></td>") == 3
    assert timeline.count('<td class="num">11 / 5 / 16</td>') == 3  # tokens in / out / total

    # TTFT: from RUN_STARTED to the first TEXT_MESSAGE_CONTENT, in text and as a marker.
    events = list(RunEvent.objects.filter(run=run).order_by("id"))
    first_content = next(e for e in events if e.type == "TEXT_MESSAGE_CONTENT")
    ttft = (first_content.created_at - events[0].created_at) // timedelta(milliseconds=1)
    assert ttft < 1000
    assert f"<dt>Time to first token</dt><dd>{ttft} ms</dd>" in timeline
    assert f"<span>TTFT {ttft} ms</span>" in timeline

    # The raw events stay below the timeline.
    below = page[page.index("</section>") :]
    assert "Raw events (timeline)" in below
    assert (
        below.index("RUN_STARTED") < below.index("TOOL_CALL_RESULT") < below.index("RUN_FINISHED")
    )


def test_an_unpriced_model_costs_unknown_and_what_the_model_wrote_is_escaped(
    alice, redis_queue, fake_openai, staff_client, settings
):
    settings.AGENT_ROUTER_MODEL = MODEL  # no catalog price for it
    arguments = {"title": "<script>alert(1)</script>", "start": "2026-03-17T09:00"}
    fake_openai.tool_call_turns = [[("call_x", "calendar_create", json.dumps(arguments))]]
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    run = Run.objects.get(run_id=body["runId"])

    page = page_of(staff_client, run)
    timeline = timeline_of(page)

    assert "unknown: 3 of 3 calls have no catalog price (catalog_fallback)" in timeline
    assert timeline.count("unknown (no catalog price)") == 3
    assert "<script>alert(1)</script>" not in page  # neither above nor in the raw events
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in timeline  # in the arguments and result


def test_a_failed_run_shows_its_error_code_and_its_cause(
    alice, redis_queue, fake_openai, staff_client
):
    fake_openai.status = 500
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED and run.error

    timeline = timeline_of(page_of(staff_client, run))

    assert ">Failed<" in timeline
    assert "RUN_ERROR · code <code>model_error</code>" in timeline
    assert f"<pre>{escape(run.error)}</pre>" in timeline
    assert 'rt-bar rt-unfinished"' in timeline  # the worker stage never finished
    assert '<span class="rt-dur">unfinished</span>' in timeline


def test_a_running_run_renders_and_once_cancelled_shows_cancelled(alice, redis_queue, staff_client):
    with FakeOpenAI() as slow_model:
        slow_model.delay = 30  # the worker's call is in flight until the cancel stops it
        worker = start_worker(
            AGENT_WORKER_MODEL=MODEL,
            OPENAI_BASE_URL=slow_model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            body = run_input()
            post_run(alice, body)
            wait_for(lambda: slow_model.requests)
            run = Run.objects.get(run_id=body["runId"])
            running = timeline_of(page_of(staff_client, run))
            assert cancel(alice, body["runId"]).json()["status"] == "cancelled"
        finally:
            stop_process(worker)

    assert ">Running<" in running and "<dd>none yet</dd>" in running
    assert "so far</dd>" in running  # the duration up to now
    assert 'router</span> <span class="rt-dur">unfinished' in running  # its call is in flight

    cancelled = timeline_of(page_of(staff_client, run))
    assert ">Cancelled<" in cancelled and "rt-status-cancelled" in cancelled
    assert "RUN_ERROR · code <code>cancelled</code>" in cancelled


def test_a_queued_run_renders_an_empty_timeline(alice, redis_queue, staff_client):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])

    timeline = timeline_of(page_of(staff_client, run))

    assert ">Queued<" in timeline
    assert (
        "Empty timeline: the run has no events and no model calls yet (it is queued)." in timeline
    )
    assert "No tool calls." in timeline and "No model calls recorded." in timeline
    assert "no model calls recorded" in timeline  # the cost


def test_a_non_staff_user_cannot_see_a_run_page(alice, redis_queue, client):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    url = f"/admin/agent_runs/run/{run.pk}/change/"

    anonymous = client.get(url)
    client.force_login(get_user_model().objects.get(username="alice"))  # the run's owner
    owner = client.get(url)

    for response in (anonymous, owner):
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
        assert "run-timeline" not in response.content.decode()


def test_the_page_reads_a_runs_events_and_model_calls_in_as_many_queries_however_many(
    alice, redis_queue, priced_model, staff_client
):
    run = run_with_a_tool_call(alice, redis_queue, priced_model)
    page_of(staff_client, run)  # the first request's one-off reads (content types...)
    with CaptureQueriesContext(connection) as few:
        page_of(staff_client, run)
    stored = RunEvent.objects.filter(run=run).count()

    # The same run with 3000 more answer deltas in its journal.
    last = RunEvent.objects.filter(run=run).latest("seq")
    content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
    RunEvent.objects.bulk_create(
        RunEvent(
            thread_id=run.thread_id,
            run=run,
            seq=last.seq + n,
            type=content["type"],
            payload=content,
        )
        for n in range(1, 3001)
    )
    with CaptureQueriesContext(connection) as many:
        page = page_of(staff_client, run)

    assert len(many.captured_queries) == len(few.captured_queries)
    assert f"<dt>Events</dt><dd>{stored + 3000:,} ·" in timeline_of(page)
    for table in ("agent_runs_runevent", "billing_usagerecord"):
        assert len([q for q in many.captured_queries if f'FROM "{table}"' in q["sql"]]) == 1
    # The raw events are all below the timeline.
    assert page.count('<tr class="raw-event">') == stored + 3000


def test_the_costs_page_still_renders_its_chart_and_tables(
    alice, redis_queue, priced_model, staff_client
):
    run_with_a_tool_call(alice, redis_queue, priced_model)

    response = staff_client.get("/admin/billing/costs/", {"days": 7})

    assert response.status_code == 200
    page = response.content.decode()
    assert '<svg class="costs-chart"' in page and "<rect" in page
    cost = format_cost(priced_total(UsageRecord.objects.all()))
    assert f'<tr><td>{MODEL}</td><td>USD</td><td class="num">3</td>' in page
    assert '<tr><td>alice</td><td>USD</td><td class="num">3</td>' in page
    assert f'<td class="num">{cost}</td>' in page
