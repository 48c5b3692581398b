"""The console's spend in the header (docs/console.md, "Spend"): today's and this month's
spend against the signed-in user's limits, as GET /api/v1/agent/usage answers them; a limit
reached is marked. Chromium against daphne and a real worker."""

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from billing.models import Budget, UsageRecord
from tests.billing.conftest import run_for
from tests.conftest import DEMO
from tests.console.conftest import Served, console_serving, signed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(scope="module")
def spend_console(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with console_serving(tmp_path_factory.mktemp("console-spend"), **DEMO) as port:
        yield Served(port=port)


def spent(user: Any, cost: str) -> UsageRecord:
    return UsageRecord.objects.create(
        run=run_for(user),
        user=user,
        stage="worker",
        model_id="openai/gpt-test",
        created_at=datetime.now(UTC),
        usage_complete=True,
        cost=Decimal(cost),
        currency="USD",
        cost_source="catalog",
    )


def test_the_header_shows_the_spend_against_the_limits(
    spend_console: Served, alice_user: Any, context: BrowserContext
) -> None:
    Budget.objects.create(user=alice_user, daily_limit=Decimal("1.50"))
    spent(alice_user, "0.42")

    page = signed_in(context, spend_console)

    shown = page.locator("#spend")
    expect(shown).to_have_text("Today 0.42 / 1.50 USD · This month 0.42 USD")
    assert "spend-reached" not in (shown.get_attribute("class") or "")
    # The limit reached: marked, and said why on hover.
    spent(alice_user, "1.08")
    page.reload()
    expect(shown).to_have_text("Today 1.50 / 1.50 USD · This month 1.50 USD")
    expect(shown).to_have_class(re.compile(r"\bspend-reached\b"))
    assert "new runs are refused" in (shown.get_attribute("title") or "")
