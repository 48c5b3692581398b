"""Billing in the admin: usage records, the catalog, and the costs page."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from billing.models import PriceCatalogEntry
from billing.services import usage_record
from tests.billing.conftest import DEEPSEEK_COST, DEEPSEEK_METADATA, DEEPSEEK_USAGE, run_for

pytestmark = pytest.mark.django_db

COSTS = "/admin/billing/costs/"


@pytest.fixture
def calls(alice_user, bob_user, deepseek_price):
    """Alice: one DeepSeek call; bob: two, and one of a model with no price."""
    records = []
    for user, model_id in [
        (alice_user, "deepseek/deepseek-chat"),
        (bob_user, "deepseek/deepseek-chat"),
        (bob_user, "deepseek/deepseek-chat"),
        (bob_user, "openai/gpt-unpriced"),
    ]:
        records.append(
            usage_record(
                run=run_for(user),
                stage="worker",
                model_id=model_id,
                usage=DEEPSEEK_USAGE,
                metadata=DEEPSEEK_METADATA,
            )
        )
    return records


def test_the_costs_page_shows_staff_the_totals_by_day_model_and_user(staff_client, calls):
    response = staff_client.get(COSTS, {"days": 7})
    assert response.status_code == 200
    report = response.context["report"]
    # 3 * 0.000203952 = 0.000611856; the unpriced call counts as a call without a price.
    assert [(row.calls, row.cost, row.unpriced_calls) for row in report.totals] == [
        (4, 3 * DEEPSEEK_COST, 1)
    ]
    assert [(row.key, row.cost) for row in report.by_user] == [
        ("bob", 2 * DEEPSEEK_COST),
        ("alice", DEEPSEEK_COST),
    ]
    page = response.content.decode()
    assert "0.000611856" in page
    assert "openai/gpt-unpriced" in page
    assert "<svg" in page
    assert len(response.context["bars"]) == 7


def test_the_costs_page_shows_each_users_budget_beside_their_spend(staff_client, calls, alice_user):
    from decimal import Decimal

    from billing.models import Budget

    Budget.objects.create(user=alice_user, daily_limit=Decimal("1.5"), monthly_limit=Decimal(20))

    response = staff_client.get(COSTS, {"days": 7})

    rows = {row.key: budget for row, _share, budget in response.context["by_user"]}
    assert rows == {"alice": "1.50 a day · 20.00 a month", "bob": ""}
    page = response.content.decode()
    assert "1.50 a day · 20.00 a month" in page and '<td class="costs-budget">none</td>' in page


def test_the_costs_page_exports_csv(staff_client, calls):
    response = staff_client.get(COSTS, {"days": 7, "export": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "group",
        "key",
        "currency",
        "calls",
        "total_tokens",
        "cost",
        "unpriced_calls",
    ]
    assert ["total", "total", "USD", "4", "6000", "0.000611856", "1"] in rows
    assert ["user", "alice", "USD", "1", "1500", "0.000203952", "0"] in rows
    assert ["model", "openai/gpt-unpriced", "USD", "1", "1500", "0", "1"] in rows


def test_the_costs_page_takes_a_start_and_end_and_rejects_a_backwards_period(staff_client, calls):
    response = staff_client.get(COSTS, {"start": "2020-01-01", "end": "2020-01-31"})
    assert response.status_code == 200
    assert response.context["report"].totals == []
    backwards = staff_client.get(COSTS, {"start": "2020-02-01", "end": "2020-01-01"})
    assert backwards.context["report"] is None
    assert "The start must not be after the end." in backwards.content.decode()


def test_the_costs_page_is_refused_to_a_non_staff_user(client, alice_user, calls):
    client.force_login(alice_user)
    response = client.get(COSTS)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
    assert client.get(COSTS, {"export": "csv"}).status_code == 302


def test_the_costs_page_needs_its_permission_for_staff_who_are_not_superusers(client, calls):
    staff = get_user_model().objects.create_user("carol", password="pw-12345!", is_staff=True)
    client.force_login(staff)
    assert client.get(COSTS).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_costs"))
    assert client.get(COSTS).status_code == 200


def test_usage_records_filter_by_model_user_and_cost_source_and_link_their_run(
    staff_client, calls, bob_user
):
    listing = "/admin/billing/usagerecord/"
    assert staff_client.get(listing).context["cl"].result_count == 4
    by_model = staff_client.get(listing, {"model_id": "openai/gpt-unpriced"})
    assert by_model.context["cl"].result_count == 1
    assert (
        staff_client.get(listing, {"user__id__exact": bob_user.pk}).context["cl"].result_count == 3
    )
    by_source = staff_client.get(listing, {"cost_source__exact": "provider"})
    assert by_source.context["cl"].result_count == 0
    unpriced = staff_client.get(listing, {"cost__isempty": "1"})
    assert unpriced.context["cl"].result_count == 1
    page = staff_client.get(listing).content.decode()
    assert f"/admin/agent_runs/run/{calls[0].run_id}/change/" in page


def test_usage_records_cannot_be_edited(staff_client, calls):
    response = staff_client.post(
        f"/admin/billing/usagerecord/{calls[0].pk}/change/", {"model_id": "x/y"}
    )
    assert response.status_code == 403


def test_a_catalog_entry_is_editable_with_its_tiers_and_history(staff_client, deepseek_price):
    change = f"/admin/billing/pricecatalogentry/{deepseek_price.pk}/change/"
    page = staff_client.get(change)
    assert page.status_code == 200
    assert 'value="0.000000028"' in page.content.decode()
    assert staff_client.get(f"{change.removesuffix('change/')}history/").status_code == 200
    listing = staff_client.get("/admin/billing/pricecatalogentry/")
    assert "deepseek/deepseek-chat" in listing.content.decode()


def test_a_catalog_entry_saved_as_new_keeps_the_old_one(staff_client, deepseek_price):
    tier = deepseek_price.tiers.get()
    response = staff_client.post(
        f"/admin/billing/pricecatalogentry/{deepseek_price.pk}/change/",
        {
            "_saveasnew": "Save as new",
            "model_id": "deepseek/deepseek-chat",
            "currency": "USD",
            "source": "admin",
            "source_url": "",
            "effective_from_0": "2030-01-01",
            "effective_from_1": "00:00:00",
            "tiers-TOTAL_FORMS": "1",
            "tiers-INITIAL_FORMS": "0",
            "tiers-MIN_NUM_FORMS": "1",
            "tiers-MAX_NUM_FORMS": "1000",
            "tiers-0-max_prompt_tokens": "",
            "tiers-0-input_cost_per_token": "0.0000003",
            "tiers-0-output_cost_per_token": "0.0000005",
            "tiers-0-cache_hit_cost_per_token": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entries = PriceCatalogEntry.objects.filter(model_id="deepseek/deepseek-chat")
    assert entries.count() == 2
    tier.refresh_from_db()
    assert str(tier.output_cost_per_token.normalize()) == "4.2E-7"
