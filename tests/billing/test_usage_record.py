"""usage_record and the run's usage summary, on PostgreSQL."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from agent_runs.models import Run
from billing.models import ModelDailyUsage, UsageRecord, UserDailyUsage
from billing.schemas import CostSource
from billing.selectors import (
    costs_report,
    run_cost_display,
    run_usage_digest,
    run_usage_summary,
)
from billing.services import daily_usage_rebuild, usage_record
from tests.billing.conftest import (
    DEEPSEEK_COST,
    DEEPSEEK_METADATA,
    DEEPSEEK_USAGE,
    price_entry,
    run_for,
)

pytestmark = pytest.mark.django_db


def record_deepseek(run, stage="worker"):
    return usage_record(
        run=run,
        stage=stage,
        model_id="deepseek/deepseek-chat",
        usage=DEEPSEEK_USAGE,
        metadata=DEEPSEEK_METADATA,
    )


def test_it_stores_a_calls_normalised_usage_and_its_catalog_cost(alice_user, deepseek_price):
    run = run_for(alice_user)
    record = record_deepseek(run)
    record.refresh_from_db()
    assert record.user == alice_user
    assert record.cost == DEEPSEEK_COST
    assert record.catalog_cost == DEEPSEEK_COST
    assert record.cost_source == CostSource.CATALOG_FALLBACK
    assert record.price_entry == deepseek_price
    assert record.currency == "USD"
    assert (record.input_tokens, record.output_tokens, record.total_tokens) == (1200, 300, 1500)
    assert (record.cached_prompt_tokens, record.prompt_cache_miss_tokens) == (1024, 176)
    assert record.latency_ms == 2500
    assert record.usage_complete
    assert record.metadata == DEEPSEEK_METADATA


def test_a_provider_cost_is_stored_as_the_calls_cost(alice_user, deepseek_price):
    record = usage_record(
        run=run_for(alice_user),
        stage="worker",
        model_id="deepseek/deepseek-chat",
        usage={**DEEPSEEK_USAGE, "cost": Decimal("0.0015")},
        metadata={**DEEPSEEK_METADATA, "weird": float("nan")},
    )
    record.refresh_from_db()
    assert record.cost_source == CostSource.PROVIDER
    assert record.cost == Decimal("0.0015")
    assert record.direct_cost == Decimal("0.0015")
    assert record.catalog_cost == DEEPSEEK_COST
    # Raw JSON PostgreSQL accepts: the Decimal as text, NaN as null.
    assert record.usage["cost"] == "0.0015"
    assert record.metadata["weird"] is None


def test_an_unknown_model_is_recorded_with_its_tokens_and_an_unknown_cost(alice_user):
    run = run_for(alice_user)
    record = usage_record(
        run=run, stage="router", model_id="openai/gpt-test", usage=DEEPSEEK_USAGE, metadata={}
    )
    assert record.cost is None
    assert record.price_entry is None
    assert record.total_tokens == 1500
    summary = run_usage_summary(run=run)
    assert summary.cost is None
    assert summary.unpriced_calls == 1
    assert (
        run_cost_display(run=run)
        == "unknown: 1 of 1 calls have no catalog price (catalog_fallback)"
    )


def test_a_call_is_priced_with_the_entry_in_force_and_a_price_change_keeps_past_costs(
    alice_user, deepseek_price
):
    run = run_for(alice_user)
    first = record_deepseek(run)
    # A new price from now on (and one that is not in force yet).
    newer = price_entry("deepseek/deepseek-chat", (None, "0.000001", "0.000002", None), days_ago=0)
    price_entry("deepseek/deepseek-chat", (None, "9", "9", None), days_ago=-1)
    second = record_deepseek(run)
    first.refresh_from_db()
    assert first.cost == DEEPSEEK_COST
    assert first.price_entry == deepseek_price
    # 1200 * 0.000001 + 300 * 0.000002 = 0.0018 (no cache rate: cached at the input rate)
    assert second.price_entry == newer
    assert second.cost == Decimal("0.0018")


def test_the_runs_summary_adds_its_calls_and_answers_a_decimal_total(
    alice_user, deepseek_price, qwen_price
):
    run = run_for(alice_user)
    record_deepseek(run, stage="router")
    usage_record(
        run=run,
        stage="worker",
        model_id="dashscope/qwen3-max",
        usage={"input_tokens": 32_001, "output_tokens": 1000, "time": 3.25},
        metadata={"total_tokens": 33_001, "completion_tokens_details": {"reasoning_tokens": 400}},
    )
    summary = run_usage_summary(run=run)
    # 0.000203952 + (32001 * 0.0000024 + 1000 * 0.000012 = 0.0888024) = 0.089006352
    assert summary.cost == Decimal("0.089006352")
    assert summary.cost_source == CostSource.CATALOG_FALLBACK
    assert (summary.model_call_records, summary.usage_records) == (2, 2)
    assert (summary.total_tokens, summary.reasoning_tokens, summary.latency_ms) == (
        34_501,
        400,
        5750,
    )
    # The raw statement (no cut-off) reads what the ORM reads (a cut-off far ahead).
    later = timezone.now() + timedelta(days=1)
    assert run_usage_summary(run=run, recorded_by=later) == summary
    assert run_usage_digest(run=run) == {
        "totalTokens": 34_501,
        "cachedPromptTokens": 1024,
        "promptCacheHitTokens": 1024,
        "promptCacheMissTokens": 176,
        "reasoningTokens": 400,
        "costSource": "catalog_fallback",
        "usageComplete": True,
    }
    assert run_cost_display(run=run) == "0.089006352 USD (catalog_fallback, 2 calls)"


def test_a_run_with_an_incomplete_call_is_flagged_in_its_digest(alice_user, deepseek_price):
    run = run_for(alice_user)
    record_deepseek(run)
    usage_record(run=run, stage="memory", model_id="deepseek/deepseek-chat", usage={}, metadata={})
    summary = run_usage_summary(run=run)
    assert summary.cost_source == CostSource.INCOMPLETE_USAGE_FALLBACK
    assert summary.cost == DEEPSEEK_COST
    assert run_usage_digest(run=run)["usageComplete"] is False


@pytest.mark.parametrize("status", [Run.Status.FAILED, Run.Status.CANCELLED])
def test_a_failed_or_cancelled_run_is_billed_for_its_calls(alice_user, deepseek_price, status):
    run = run_for(alice_user, status=status)
    record_deepseek(run)
    assert run_usage_summary(run=run).cost == DEEPSEEK_COST


def test_it_works_inside_a_transaction_and_leaves_no_trace_when_that_rolls_back(
    alice_user, deepseek_price
):
    run = run_for(alice_user)
    with transaction.atomic():
        record_deepseek(run)
    assert run_usage_summary(run=run).model_call_records == 1

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        record_deepseek(run)
        raise Abort
    assert run_usage_summary(run=run).model_call_records == 1
    assert ModelDailyUsage.objects.get().calls == 1


def test_a_strangers_calls_are_not_in_my_runs_summary(alice_user, bob_user, deepseek_price):
    alices, bobs = run_for(alice_user), run_for(bob_user)
    record_deepseek(alices)
    record_deepseek(bobs)
    record_deepseek(bobs)
    assert run_usage_summary(run=alices).model_call_records == 1
    assert run_usage_summary(run=alices).cost == DEEPSEEK_COST
    assert UsageRecord.objects.filter(user=bob_user).count() == 2


def test_daily_totals_follow_each_record_and_a_rebuild_gives_the_same(
    alice_user, bob_user, deepseek_price
):
    record_deepseek(run_for(alice_user))
    record_deepseek(run_for(bob_user))
    usage_record(run=run_for(bob_user), stage="worker", model_id="x/unknown", usage={}, metadata={})
    today = timezone.now().date()

    def snapshot():
        return (
            sorted(
                ModelDailyUsage.objects.values_list("model_id", "calls", "priced_calls", "cost")
            ),
            sorted(UserDailyUsage.objects.values_list("user_id", "calls", "total_tokens", "cost")),
        )

    incremented = snapshot()
    assert incremented[0] == [
        ("deepseek/deepseek-chat", 2, 2, 2 * DEEPSEEK_COST),
        ("x/unknown", 1, 0, Decimal(0)),
    ]
    assert daily_usage_rebuild(start=today - timedelta(days=1), end=today) == 4
    assert snapshot() == incremented


def test_the_costs_report_totals_by_day_model_and_user(alice_user, bob_user, deepseek_price):
    record_deepseek(run_for(alice_user))
    record_deepseek(run_for(bob_user))
    record_deepseek(run_for(bob_user))
    today = timezone.now().date()
    report = costs_report(start=today - timedelta(days=6), end=today)
    assert [(row.currency, row.calls, row.cost) for row in report.totals] == [
        ("USD", 3, 3 * DEEPSEEK_COST)
    ]
    assert [(row.key, row.cost) for row in report.by_day] == [
        (today.isoformat(), 3 * DEEPSEEK_COST)
    ]
    assert [(row.key, row.calls) for row in report.by_model] == [("deepseek/deepseek-chat", 3)]
    assert [(row.key, row.calls) for row in report.by_user] == [("bob", 2), ("alice", 1)]
    # Yesterday and before: nothing.
    earlier = costs_report(start=today - timedelta(days=9), end=today - timedelta(days=1))
    assert earlier.totals == []
