"""Budgets (docs/billing.md, "Budgets"): a user's daily and monthly limits in money, their
day and month in the profile's timezone, ``GET /api/v1/agent/usage``, ``set_budget``, a run
refused once a limit is reached (in each protocol's shape, nothing written) and a run that
reaches it mid-way stopped before its next model call. Real PostgreSQL, Redis and RQ worker;
the model is a priced loopback server."""

import asyncio
import io
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import openai
import pytest
from a2a.utils.errors import InvalidParamsError
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from agent_runs.models import Run, RunEvent, UserProfile
from billing.budgets import budget_periods
from billing.models import Budget, UsageRecord
from tests.agent_runs.admin.test_run_page import MODEL
from tests.agent_runs.protocols.a2a.test_a2a_sdk import client_for, collect, message
from tests.agent_runs.protocols.openai_responses.test_openai_sdk import sdk
from tests.billing.conftest import price_entry, run_for
from tests.conftest import post_run, run_input, work_burst

pytestmark = pytest.mark.django_db

USAGE = "/api/v1/agent/usage"


def alice() -> Any:
    return get_user_model().objects.get(username="alice")


def record(user: Any, cost: str | None, at: datetime) -> UsageRecord:
    return UsageRecord.objects.create(
        run=run_for(user),
        user=user,
        stage="worker",
        model_id=MODEL,
        created_at=at,
        usage_complete=True,
        cost=None if cost is None else Decimal(cost),
        currency="USD",
        cost_source="catalog" if cost is not None else "unknown",
    )


def test_the_day_and_month_are_the_users_own_in_their_timezone(alice_token):
    user = alice()
    UserProfile.objects.create(user=user, settings={"timezone": "Asia/Shanghai"})
    # 2026-03-31 17:30 UTC is 2026-04-01 01:30 in Shanghai: a new day and a new month there.
    now = datetime(2026, 3, 31, 17, 30, tzinfo=UTC)
    record(user, "0.40", datetime(2026, 3, 31, 15, 0, tzinfo=UTC))  # 23:00 on 31 March there
    record(user, "0.25", datetime(2026, 3, 31, 16, 30, tzinfo=UTC))  # 00:30 on 1 April there
    record(user, None, datetime(2026, 3, 31, 17, 0, tzinfo=UTC))

    day, month = budget_periods(user_id=user.pk, now=now)

    shanghai = ZoneInfo("Asia/Shanghai")
    assert day.start == datetime(2026, 4, 1, tzinfo=shanghai)
    assert day.resets_at == datetime(2026, 4, 2, tzinfo=shanghai)
    assert month.start == datetime(2026, 4, 1, tzinfo=shanghai)
    assert month.resets_at == datetime(2026, 5, 1, tzinfo=shanghai)
    assert day.spent == month.spent == Decimal("0.25")
    assert day.unpriced_calls == 1
    # Without a profile's timezone, UTC: both calls were on 31 March.
    UserProfile.objects.filter(user=user).delete()
    day, month = budget_periods(user_id=user.pk, now=now)
    assert day.start == datetime(2026, 3, 31, tzinfo=UTC)
    assert day.spent == Decimal("0.65") and month.spent == Decimal("0.65")


def test_usage_answers_the_callers_spend_against_their_limits(alice, bob, settings):
    user = get_user_model().objects.get(username="alice")
    Budget.objects.create(user=user, daily_limit=Decimal("1.50"))
    now = datetime.now(UTC)
    record(user, "0.42", now)
    record(get_user_model().objects.get(username="bob"), "9", now)  # not alice's
    settings.BUDGET_DEFAULT_MONTHLY = Decimal("20")  # not hers: she has a budget

    body = alice.get(USAGE).json()
    others = bob.get(USAGE).json()

    assert body["currency"] == "USD"
    day, month = body["periods"]
    assert (day["period"], day["limit"], day["spent"], day["remaining"]) == (
        "day",
        "1.50",
        "0.42",
        "1.08",
    )
    assert (month["limit"], month["spent"], month["remaining"]) == (None, "0.42", None)
    assert day["unpricedCalls"] == 0 and day["resetsAt"] > day["start"]
    # Bob has no budget of his own: the default applies.
    assert [p["limit"] for p in others["periods"]] == [None, "20.00"]
    assert others["periods"][1]["spent"] == "9.00"


def test_set_budget_creates_updates_and_clears_a_budget(alice_token):
    out = io.StringIO()
    call_command("set_budget", "alice", "--daily", "1.50", "--monthly", "20", stdout=out)
    budget = Budget.objects.get(user=alice())
    assert (budget.daily_limit, budget.monthly_limit) == (Decimal("1.50"), Decimal("20"))
    assert "day: limit 1.50 USD, spent 0.00 USD" in out.getvalue()
    call_command("set_budget", "alice", "--monthly", "30", stdout=io.StringIO())
    budget.refresh_from_db()
    assert (budget.daily_limit, budget.monthly_limit) == (Decimal("1.50"), Decimal("30"))
    out = io.StringIO()
    call_command("set_budget", "alice", "--clear", stdout=out)
    budget.refresh_from_db()
    assert (budget.daily_limit, budget.monthly_limit) == (None, None)
    assert "day: limit none" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("set_budget", "nobody", "--daily", "1")
    with pytest.raises(CommandError):
        call_command("set_budget", "alice", "--daily", "-1")


@pytest.mark.django_db(transaction=True)
def test_a_run_is_refused_once_a_limit_is_reached_and_nothing_is_written(alice, redis_queue):
    user = get_user_model().objects.get(username="alice")
    Budget.objects.create(user=user, daily_limit=Decimal("1.50"))
    record(user, "1.50", datetime.now(UTC))
    runs = Run.objects.count()

    refused = post_run(alice, run_input())
    budget = Budget.objects.get(user=user)
    budget.daily_limit, budget.monthly_limit = None, Decimal(1)
    budget.save()  # read anew at once in this process (elsewhere within seconds)

    assert refused.status_code == 402
    assert refused.json() == {"detail": "budget exceeded: the daily limit of 1.50 USD is reached"}
    again = post_run(alice, run_input())
    assert again.status_code == 402
    assert again.json()["detail"] == "budget exceeded: the monthly limit of 1.00 USD is reached"
    assert Run.objects.count() == runs


@pytest.mark.django_db(transaction=True)
def test_a_run_that_reaches_the_limit_stops_before_its_next_model_call(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_ROUTER_MODEL = MODEL
    # Each call costs 11 * 0.01 + 5 * 0.02 = 0.21: the router's call reaches the limit.
    price_entry(MODEL, (None, "0.01", "0.02", None))
    user = get_user_model().objects.get(username="alice")
    Budget.objects.create(user=user, daily_limit=Decimal("0.20"))
    fake_openai.tool_call_turns = [[("call_1", "calendar_list", "{}")]]
    body = run_input()
    post_run(alice, body)

    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED
    end = RunEvent.objects.filter(run=run).order_by("pk").last()
    assert end is not None and end.payload["type"] == "RUN_ERROR"
    assert end.payload["code"] == "budget_exceeded"
    assert end.payload["message"] == "budget exceeded: the daily limit of 0.20 USD is reached"
    # One call made (the router's), none after it: overspend is at most that one call.
    records = UsageRecord.objects.filter(run=run)
    assert [r.stage for r in records] == ["router"]
    spent = sum(r.cost for r in records if r.cost is not None)
    assert spent == Decimal("0.21")
    day = alice.get(USAGE).json()["periods"][0]
    assert Decimal(day["spent"]) == spent and day["remaining"] == "0.00"
    # What it said so far is kept: its journal up to the refusal.
    kept = [e.payload["type"] for e in RunEvent.objects.filter(run=run).order_by("pk")]
    assert kept[:3] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_every_protocol_refuses_a_run_over_budget_in_its_own_shape(alice, alice_token, daphne_port):
    user = get_user_model().objects.get(username="alice")
    Budget.objects.create(user=user, daily_limit=Decimal("0"))
    detail = "budget exceeded: the daily limit of 0.00 USD is reached"

    with pytest.raises(openai.RateLimitError) as raised:
        sdk(daphne_port, alice_token).responses.create(model="agent", input="hi")
    agent_api = alice.post(
        "/api/v1/agent/process",
        {"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        format="json",
    )
    spec_task = alice.post("/api/tasks", {"task": "hi"}, format="json")
    v1_task = alice.post("/ap/v1/agent/tasks", {"input": "hi"}, format="json")
    ag_ui = alice.post(
        "/api/v1/agent/ag-ui",
        run_input(forwardedProps={}),
        format="json",
        HTTP_ACCEPT="application/json",
    )

    async def over_a2a() -> str:
        client = await client_for(daphne_port, alice_token, streaming=False)
        try:
            await collect(client.send_message(message("hi")))
        except InvalidParamsError as exc:
            return str(exc)
        finally:
            await client.close()
        return "accepted"

    assert raised.value.code == "insufficient_quota"
    assert raised.value.status_code == 429 and detail in str(raised.value)
    assert agent_api.status_code == 402
    assert agent_api.json()["error"] == {"code": "budget_exceeded", "message": detail}
    assert spec_task.status_code == v1_task.status_code == ag_ui.status_code == 402
    assert detail in json.dumps(spec_task.json()) and detail in json.dumps(v1_task.json())
    assert ag_ui.json() == {"detail": detail}
    assert detail in asyncio.run(over_a2a())
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_runs_in_flight_at_the_edge_overspend_by_at_most_one_call_each(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_ROUTER_MODEL = MODEL
    price_entry(MODEL, (None, "0.01", "0.02", None))  # 0.21 a call
    user = get_user_model().objects.get(username="alice")
    Budget.objects.create(user=user, daily_limit=Decimal("0.20"))
    fake_openai.delay = 0.5  # both runs' first calls are made before either is billed
    bodies = [run_input(), run_input()]
    for body in bodies:
        post_run(alice, body)

    work_burst(redis_queue)  # one worker holds both runs at once

    runs = Run.objects.filter(run_id__in=[body["runId"] for body in bodies])
    assert {run.status for run in runs} == {Run.Status.FAILED}
    for run in runs:
        assert [r.stage for r in UsageRecord.objects.filter(run=run)] == ["router"]
    spent = sum(r.cost for r in UsageRecord.objects.filter(user=user) if r.cost is not None)
    assert spent == Decimal("0.42") <= Decimal("0.20") + 2 * Decimal("0.21")


def test_a_users_limits_are_kept_a_few_seconds_and_read_anew_once_saved(
    alice_token, django_assert_num_queries, monkeypatch
):
    from billing import budgets

    user = alice()
    first = budgets.user_limits(user_id=user.pk)
    with django_assert_num_queries(0):
        assert budgets.user_limits(user_id=user.pk) == first  # kept: no query
    budget = Budget.objects.create(user=user, daily_limit=Decimal("2"))  # saved: forgotten
    assert budgets.user_limits(user_id=user.pk).daily == Decimal("2")
    Budget.objects.filter(pk=budget.pk).update(daily_limit=Decimal("3"))  # no save: kept
    assert budgets.user_limits(user_id=user.pk).daily == Decimal("2")
    monkeypatch.setattr(budgets, "LIMITS_KEPT_SECONDS", 0.0)  # once the time has passed
    assert budgets.user_limits(user_id=user.pk).daily == Decimal("3")
