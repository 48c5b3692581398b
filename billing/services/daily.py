"""A usage record's day's totals, per model and per user, and their rebuild from the records."""

from collections.abc import Iterator
from datetime import UTC, date
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import TruncDate

from billing import selectors
from billing.models import ModelDailyUsage, UsageRecord, UserDailyUsage


def usage_record_store(record: UsageRecord) -> None:
    """The record and its day's totals, with the ORM: several statements, one savepoint."""
    with transaction.atomic():
        record.save(force_insert=True)
        _daily_usage_add(record)


def _daily_usage_add(record: UsageRecord) -> None:
    """Add one record to its day's totals per model and per user."""
    day = record.created_at.astimezone(UTC).date()
    amounts = {
        "calls": 1,
        "priced_calls": 0 if record.cost is None else 1,
        "input_tokens": record.input_tokens or 0,
        "output_tokens": record.output_tokens or 0,
        "total_tokens": record.total_tokens or 0,
        "cost": record.cost or Decimal(0),
    }
    keys = {"day": day, "currency": record.currency}
    _totals_add(ModelDailyUsage, {**keys, "model_id": record.model_id}, amounts)
    _totals_add(UserDailyUsage, {**keys, "user_id": record.user_id}, amounts)


def _totals_add(
    model: type[ModelDailyUsage] | type[UserDailyUsage],
    keys: dict[str, Any],
    amounts: dict[str, Any],
) -> None:
    """Increment the row of ``keys`` (an UPDATE: one statement once the day's row exists)."""
    increments = {name: F(name) + value for name, value in amounts.items()}
    if model.objects.filter(**keys).update(**increments):
        return
    try:
        with transaction.atomic():
            model.objects.create(**keys, **amounts)
    except IntegrityError:  # a concurrent call created the row first
        model.objects.filter(**keys).update(**increments)


@transaction.atomic
def daily_usage_rebuild(*, start: date, end: date) -> int:
    """Recompute the daily totals of ``start`` to ``end`` (UTC days, both included) from the
    usage records, in SQL; answers the number of total rows written. For records written
    by other means than ``usage_record`` (imports, the benchmark's seed)."""
    records = selectors.usage_in_period(start=start, end=end).annotate(
        day=TruncDate("created_at", tzinfo=UTC)
    )
    ModelDailyUsage.objects.filter(day__gte=start, day__lte=end).delete()
    UserDailyUsage.objects.filter(day__gte=start, day__lte=end).delete()
    by_model = ModelDailyUsage.objects.bulk_create(
        (ModelDailyUsage(**row) for row in _daily_rows(records, "model_id")), batch_size=5000
    )
    by_user = UserDailyUsage.objects.bulk_create(
        (UserDailyUsage(**row) for row in _daily_rows(records, "user_id")), batch_size=5000
    )
    return len(by_model) + len(by_user)


def _daily_rows(records: QuerySet[UsageRecord], key: str) -> Iterator[dict[str, Any]]:
    rows = (
        records.order_by()
        .values("day", "currency", key)
        .annotate(
            calls_sum=Count("*"),
            priced_sum=Count("cost"),
            input_sum=Sum("input_tokens"),
            output_sum=Sum("output_tokens"),
            total_sum=Sum("total_tokens"),
            cost_sum=Sum("cost"),
        )
    )
    for row in rows.iterator(chunk_size=5000):
        yield {
            "day": row["day"],
            "currency": row["currency"],
            key: row[key],
            "calls": row["calls_sum"],
            "priced_calls": row["priced_sum"],
            "input_tokens": row["input_sum"] or 0,
            "output_tokens": row["output_sum"] or 0,
            "total_tokens": row["total_sum"] or 0,
            "cost": row["cost_sum"] or Decimal(0),
        }
