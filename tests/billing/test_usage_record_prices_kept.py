"""usage_record keeps the catalog's prices per process and writes a call in one statement,
yet prices every call with the entry in force when it is recorded, whoever changed the
catalog meanwhile (billing/services/usage.py, billing/selectors.py ``CatalogPrices``)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.models import ModelDailyUsage, PriceCatalogEntry, PriceTier, UserDailyUsage
from billing.selectors import catalog_prices
from billing.services import usage_record
from tests.billing.conftest import (
    DEEPSEEK_COST,
    DEEPSEEK_METADATA,
    DEEPSEEK_USAGE,
    price_entry,
    run_for,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _nothing_kept():
    catalog_prices.clear()


def record_deepseek(run):
    return usage_record(
        run=run,
        stage="worker",
        model_id="deepseek/deepseek-chat",
        usage=DEEPSEEK_USAGE,
        metadata=DEEPSEEK_METADATA,
    )


@pytest.mark.django_db(transaction=True)  # in autocommit, as the job records usage
def test_once_the_price_is_kept_a_call_is_one_statement_with_its_day_totals(
    alice_user, deepseek_price
):
    run = run_for(alice_user)
    record_deepseek(run)
    run.thread  # loaded, as the job's run has it  # noqa: B018
    with CaptureQueriesContext(connection) as statements:
        record = record_deepseek(run)

    assert len(statements.captured_queries) == 1
    assert record.pk is not None and record.cost == DEEPSEEK_COST
    assert record.price_entry == deepseek_price
    by_model = ModelDailyUsage.objects.get(model_id="deepseek/deepseek-chat")
    assert (by_model.calls, by_model.priced_calls, by_model.total_tokens) == (2, 2, 3000)
    assert by_model.cost == 2 * DEEPSEEK_COST
    assert UserDailyUsage.objects.get(user=alice_user).calls == 2


def test_a_tier_edited_in_place_prices_the_next_call(alice_user, deepseek_price):
    run = run_for(alice_user)
    assert record_deepseek(run).cost == DEEPSEEK_COST  # the entry is kept now
    # As the admin would, from another process: the same entry, a new output price.
    PriceTier.objects.filter(entry=deepseek_price).update(output_cost_per_token=Decimal(0))

    record = record_deepseek(run)

    # 176 * 0.00000028 + 1024 * 0.000000028 = 0.000077952
    assert record.cost == Decimal("0.000077952")
    record.refresh_from_db()
    assert record.cost == Decimal("0.000077952")
    assert ModelDailyUsage.objects.get().cost == DEEPSEEK_COST + Decimal("0.000077952")


def test_a_price_added_or_moved_elsewhere_counts_from_the_next_call(alice_user):
    run = run_for(alice_user)
    unpriced = record_deepseek(run)  # no entry: "no price" is kept
    entry = price_entry("deepseek/deepseek-chat", (None, "0.000001", "0.000002", None))

    priced = record_deepseek(run)

    # Moved to start tomorrow (an entry that priced a call cannot be deleted).
    PriceCatalogEntry.objects.filter(pk=entry.pk).update(
        effective_from=timezone.now() + timedelta(days=1)
    )
    unpriced_again = record_deepseek(run)

    assert unpriced.cost is None and unpriced.price_entry is None
    # 1200 * 0.000001 + 300 * 0.000002
    assert priced.cost == Decimal("0.0018") and priced.price_entry == entry
    assert unpriced_again.cost is None and unpriced_again.price_entry is None
    assert ModelDailyUsage.objects.get().priced_calls == 1
