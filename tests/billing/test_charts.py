"""The costs page's chart geometry (billing/charts.py), without a database."""

from datetime import date
from decimal import Decimal

from billing.charts import CHART_HEIGHT, day_bars, share_percent
from billing.selectors import CostRow


def row(day: str, cost: str, currency: str = "USD") -> CostRow:
    return CostRow(day, currency, 1, 10, Decimal(cost), 0)


def test_every_day_gets_a_bar_and_the_highest_day_is_full_height():
    bars = day_bars(
        [row("2026-03-01", "2"), row("2026-03-03", "0.5"), row("2026-03-02", "99", "CNY")],
        start=date(2026, 3, 1),
        end=date(2026, 3, 4),
        currency="USD",
    )
    assert [bar.day.day for bar in bars] == [1, 2, 3, 4]
    assert [bar.height for bar in bars] == [Decimal(CHART_HEIGHT), 0, Decimal("40.00"), 0]
    assert bars[0].y == 0
    assert bars[1].x == 200  # 800 units over four days


def test_a_period_without_costs_draws_empty_bars():
    bars = day_bars([], start=date(2026, 3, 1), end=date(2026, 3, 1), currency="USD")
    assert [(bar.height, bar.cost) for bar in bars] == [(0, 0)]


def test_share_percent_is_relative_to_the_highest():
    assert share_percent(Decimal("0.5"), Decimal("2")) == Decimal("25.0")
    assert share_percent(Decimal("0"), Decimal("0")) == 0
