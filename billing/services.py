"""Writes of billing: a usage record per model call, and pricing catalog updates."""

import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from agent_runs import metrics
from agent_runs.models import Run
from billing import selectors
from billing.catalog import CatalogError, CatalogPrice, tiers_key
from billing.models import (
    ModelDailyUsage,
    PriceCatalogEntry,
    PriceTier,
    UsageRecord,
    UserDailyUsage,
)
from billing.pricing import call_cost, normalise_usage, price_call


def usage_record(
    *, run: Run, stage: str, model_id: str, usage: Mapping[str, Any], metadata: Mapping[str, Any]
) -> UsageRecord:
    """Store one model call's usage, normalised and priced (docs/spec/sse-events-and-usage.md
    5.2-5.6) with the catalog entry in force now.

    ``usage`` holds the direct fields (``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``time`` in seconds, ``cost``), ``metadata`` the provider's raw usage object. Call it once
    per call, as the call ends, also for runs that later fail or are cancelled.

    Atomic on its own (a savepoint inside a transaction). Call it in autocommit, outside any
    long transaction: it also adds the call to its day's totals, whose rows stay locked until
    the commit, and a record inside a transaction that rolls back is lost with it. A call
    whose run was deleted meanwhile (its thread deleted) is recorded all the same, without
    its run: ``thread_ref`` and ``run_ref`` name it.
    """
    now = timezone.now()
    entry = selectors.price_entry_in_force(model_id=model_id, at=now)
    priced = price_call(
        normalise_usage(usage, metadata),
        None if entry is None else selectors.price_of(entry),
        default_currency=settings.BILLING_DEFAULT_CURRENCY,
    )
    cost, cost_source = call_cost(priced)
    call = priced.usage
    record = UsageRecord(
        run=run,
        thread_ref=run.thread_id,
        run_ref=run.run_id,
        user_id=run.thread.owner_id,
        stage=stage,
        model_id=model_id,
        created_at=now,
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        total_tokens=call.total_tokens,
        cached_prompt_tokens=call.cached_prompt_tokens,
        prompt_cache_hit_tokens=call.prompt_cache_hit_tokens,
        prompt_cache_miss_tokens=call.prompt_cache_miss_tokens,
        reasoning_tokens=call.reasoning_tokens,
        latency_ms=call.latency_ms,
        usage_complete=call.usage_complete,
        direct_cost=call.direct_cost,
        catalog_cost=priced.catalog_cost,
        cost=cost,
        currency=priced.currency,
        cost_source=cost_source,
        price_entry=entry,
        usage=_jsonable(usage),
        metadata=_jsonable(metadata),
    )
    try:
        _usage_record_store(record)
    except IntegrityError:
        if Run.objects.filter(pk=run.pk).exists():
            raise
        # The run's thread was deleted while the call ran (its job stopped late): the call
        # is billed all the same, still named by its thread_ref and run_ref.
        record.pk, record.run = None, None
        _usage_record_store(record)
    _usage_measure(record)
    return record


def _usage_measure(record: UsageRecord) -> None:
    """The call in this process's metrics (docs/operations.md): a float there, never here."""
    model = record.model_id
    metrics.MODEL_CALLS.labels(model).inc()
    for kind, tokens in (("input", record.input_tokens), ("output", record.output_tokens)):
        if tokens:
            metrics.MODEL_TOKENS.labels(model, kind).inc(tokens)
    if record.cost is not None:
        metrics.MODEL_COST.labels(model, record.currency).inc(float(record.cost))
    if record.latency_ms is not None:
        metrics.MODEL_CALL_LATENCY.labels(model).observe(record.latency_ms / 1000)


def _usage_record_store(record: UsageRecord) -> None:
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


@dataclass
class CatalogUpdate:
    """What ``pricing_catalog_update`` did (or would do, on a dry run), by model id."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@transaction.atomic
def pricing_catalog_update(
    *,
    prices: Sequence[CatalogPrice],
    models: Collection[str] | None = None,
    dry_run: bool = False,
) -> CatalogUpdate:
    """Bring the catalog in line with ``prices`` (only ``models``, if given).

    A model whose latest entry has other prices or currency gets a new entry, effective from
    the price's ``effective_from`` (default: now), which must be later than that entry's:
    earlier entries, and the costs recorded with them, stay as they were. Running it again
    with the same prices changes nothing. All or nothing: ``CatalogError`` changes nothing.
    """
    if models is not None:
        unknown = sorted(set(models) - {price.model_id for price in prices})
        if unknown:
            raise CatalogError(f"not in the catalog source: {', '.join(unknown)}")
        prices = [price for price in prices if price.model_id in models]
    now = timezone.now()
    latest = selectors.price_entries_latest(model_ids=[price.model_id for price in prices])
    result = CatalogUpdate()
    for price in prices:
        current = latest.get(price.model_id)
        if current is not None and _same_price(current, price):
            result.unchanged.append(price.model_id)
            continue
        effective_from = price.effective_from or now
        if current is not None and effective_from <= current.effective_from:
            raise CatalogError(
                f"{price.model_id}: its price differs from the entry effective from "
                f"{current.effective_from.isoformat()}; a new price needs a later effective_from"
            )
        (result.added if current is None else result.changed).append(price.model_id)
        if not dry_run:
            _entry_create(price=price, effective_from=effective_from)
    return result


def _same_price(entry: PriceCatalogEntry, price: CatalogPrice) -> bool:
    tiers = selectors.price_of(entry).tiers
    return entry.currency == price.currency and tiers_key(tiers) == tiers_key(price.tiers)


def _entry_create(*, price: CatalogPrice, effective_from: Any) -> PriceCatalogEntry:
    entry = PriceCatalogEntry.objects.create(
        model_id=price.model_id,
        currency=price.currency,
        source=price.source[:200],
        source_url=price.source_url,
        effective_from=effective_from,
    )
    PriceTier.objects.bulk_create(
        PriceTier(
            entry=entry,
            max_prompt_tokens=tier.max_prompt_tokens,
            input_cost_per_token=tier.input_cost_per_token,
            output_cost_per_token=tier.output_cost_per_token,
            cache_hit_cost_per_token=tier.cache_hit_cost_per_token,
        )
        for tier in price.tiers
    )
    return entry


def _jsonable(value: Mapping[str, Any]) -> dict[str, Any]:
    """The raw usage as JSON PostgreSQL accepts: Decimals and odd types as text, NaN and
    infinities as null. Never raises: a strange provider payload must not lose the record."""

    def clean(item: Any) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, Mapping):
            return {str(key): clean(inner) for key, inner in item.items()}
        if isinstance(item, list | tuple):
            return [clean(inner) for inner in item]
        if isinstance(item, Decimal):
            return str(item) if item.is_finite() else None
        return item

    cleaned = json.loads(json.dumps(clean(value), cls=DjangoJSONEncoder, default=str))
    return cleaned if isinstance(cleaned, dict) else {}
