"""Geometry of the costs page's server-rendered charts. Pure: rows in, shapes out."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from billing.selectors import CostRow

CHART_WIDTH = 800
CHART_HEIGHT = 160


@dataclass(frozen=True)
class Bar:
    """One day's bar of the SVG chart, in the chart's user units."""

    day: date
    cost: Decimal
    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal


def day_bars(rows: Sequence[CostRow], *, start: date, end: date, currency: str) -> list[Bar]:
    """A bar per day from ``start`` to ``end`` (days without usage too) of ``currency``'s cost,
    the highest day as tall as the chart."""
    costs = {row.key: row.cost for row in rows if row.currency == currency}
    days = [start + timedelta(days=offset) for offset in range((end - start).days + 1)]
    highest = max(costs.values(), default=Decimal(0))
    slot = Decimal(CHART_WIDTH) / len(days)
    bars = []
    for index, day in enumerate(days):
        cost = costs.get(day.isoformat(), Decimal(0))
        height = (cost / highest * CHART_HEIGHT).quantize(Decimal("0.01")) if highest else 0
        bars.append(
            Bar(
                day=day,
                cost=cost,
                x=(slot * index).quantize(Decimal("0.01")),
                y=Decimal(CHART_HEIGHT) - height,
                width=max(slot * Decimal("0.8"), Decimal("0.5")).quantize(Decimal("0.01")),
                height=Decimal(height),
            )
        )
    return bars


def share_percent(value: Decimal, highest: Decimal) -> Decimal:
    """``value`` as a percentage of ``highest``, for a CSS bar's width."""
    if highest <= 0:
        return Decimal(0)
    return (value / highest * 100).quantize(Decimal("0.1"))
