"""Budgets: a user's spending against their daily and monthly limits (docs/billing.md,
"Budgets"). Days and months are the user's own, in the timezone of their profile (UTC
without one); what they spent in one is the sum of their usage records' costs made in it
(a call of unknown cost counts as zero, and is counted apart)."""

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.utils import timezone

from agent_runs.selectors.profiles import user_profile_settings, user_timezone
from agent_runs.usage import Limits
from billing.errors import BudgetExceeded
from billing.limits_kept import KEPT_MAX, LIMITS_KEPT_SECONDS, kept
from billing.models import Budget, UsageRecord


@dataclass(frozen=True)
class Period:
    """One period of a user's budget as it stands."""

    period: str  # "day" or "month"
    start: datetime
    resets_at: datetime
    limit: Decimal | None
    spent: Decimal
    unpriced_calls: int

    @property
    def remaining(self) -> Decimal | None:
        return None if self.limit is None else max(self.limit - self.spent, Decimal(0))

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.spent >= self.limit


def user_limits(*, user_id: Any) -> Limits:
    """The user's own budget, else the defaults of the settings. Every run reads it twice
    (as it is created, and as its job starts): it is kept in the process for
    ``LIMITS_KEPT_SECONDS`` (a budget saved here is read anew at once, ``limits_forget``;
    in other processes within that time)."""
    now = time.monotonic()
    held = kept.get(user_id)
    if held is not None and now - held[0] < LIMITS_KEPT_SECONDS:
        return held[1]
    limits = _limits_read(user_id)
    if len(kept) >= KEPT_MAX:
        kept.clear()
    kept[user_id] = (now, limits)
    return limits


def _limits_read(user_id: Any) -> Limits:
    budget = Budget.objects.filter(user_id=user_id).values("daily_limit", "monthly_limit").first()
    if budget is not None:
        return Limits(daily=budget["daily_limit"], monthly=budget["monthly_limit"])
    return Limits(daily=settings.BUDGET_DEFAULT_DAILY, monthly=settings.BUDGET_DEFAULT_MONTHLY)


def budget_periods(
    *, user_id: Any, limits: Limits | None = None, now: datetime | None = None
) -> list[Period]:
    """The user's day and month as they stand now, each with its limit and its spend."""
    limits = limits if limits is not None else user_limits(user_id=user_id)
    now = now or timezone.now()
    zone = user_timezone(user_profile_settings(user_id=user_id)) or UTC
    day_start, day_end = _day(now, zone)
    month_start, month_end = _month(now, zone)
    return [
        _period(user_id, "day", day_start, day_end, limits.daily),
        _period(user_id, "month", month_start, month_end, limits.monthly),
    ]


def budget_check(*, user_id: Any, limits: Limits | None = None) -> None:
    """``BudgetExceeded`` when a limit of the user's is reached (nothing to read when the
    user has no limit)."""
    limits = limits if limits is not None else user_limits(user_id=user_id)
    if not limits.any:
        return
    for period in budget_periods(user_id=user_id, limits=limits):
        if period.reached:
            assert period.limit is not None
            raise BudgetExceeded(
                period=period.period, limit=period.limit, currency=budget_currency()
            )


def budget_currency() -> str:
    return str(settings.BILLING_DEFAULT_CURRENCY)


def _period(
    user_id: Any, name: str, start: datetime, end: datetime, limit: Decimal | None
) -> Period:
    totals = UsageRecord.objects.filter(
        user_id=user_id, created_at__gte=start, created_at__lt=end
    ).aggregate(spent=Sum("cost"), unpriced=Count("pk", filter=Q(cost__isnull=True)))
    return Period(
        period=name,
        start=start,
        resets_at=end,
        limit=limit,
        spent=totals["spent"] or Decimal(0),
        unpriced_calls=totals["unpriced"],
    )


def _day(now: datetime, zone: tzinfo) -> tuple[datetime, datetime]:
    local = now.astimezone(zone)
    start = datetime(local.year, local.month, local.day, tzinfo=zone)
    following = (start + timedelta(days=1, hours=12)).date()
    return start, datetime(following.year, following.month, following.day, tzinfo=zone)


def _month(now: datetime, zone: tzinfo) -> tuple[datetime, datetime]:
    local = now.astimezone(zone)
    start = datetime(local.year, local.month, 1, tzinfo=zone)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    return start, datetime(year, month, 1, tzinfo=zone)
