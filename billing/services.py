"""Writes of billing: a usage record per model call, and pricing catalog updates."""

import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
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
from billing.pricing import Price, call_cost, normalise_usage, price_call


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

    On PostgreSQL the record and both day totals are one statement, priced with the entry
    this process keeps (``selectors.catalog_prices``), which the statement checks is still
    the one in force.
    """
    now = timezone.now()
    if connection.vendor == "postgresql":
        record = _usage_record_priced_once(run, stage, model_id, usage, metadata, now)
    else:
        entry = selectors.price_entry_in_force(model_id=model_id, at=now)
        price = None if entry is None else selectors.price_of(entry)
        record = _usage_record_new(run, stage, model_id, usage, metadata, now, entry, price)
        _usage_record_save(record)
    _usage_measure(record)
    return record


def _usage_record_new(
    run: Run,
    stage: str,
    model_id: str,
    usage: Mapping[str, Any],
    metadata: Mapping[str, Any],
    now: datetime,
    entry: PriceCatalogEntry | None,
    price: Price | None,
) -> UsageRecord:
    """The call's record, priced with ``price`` (``entry``'s), not saved."""
    priced = price_call(
        normalise_usage(usage, metadata), price, default_currency=settings.BILLING_DEFAULT_CURRENCY
    )
    cost, cost_source = call_cost(priced)
    call = priced.usage
    return UsageRecord(
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


def _usage_record_save(record: UsageRecord) -> None:
    """The record and its day's totals, with the ORM (SQLite): several statements."""
    try:
        _usage_record_store(record)
    except IntegrityError:
        if _run_exists(record):
            raise
        # The run's thread was deleted while the call ran (its job stopped late): the call
        # is billed all the same, still named by its thread_ref and run_ref.
        record.pk, record.run = None, None
        _usage_record_store(record)


def _run_exists(record: UsageRecord) -> bool:
    return Run.objects.filter(pk=record.run_id or 0).exists()


# Tries of the cached price before pricing as the ORM path does: each miss means the
# catalog changed between the reload and the insert.
_PRICE_TRIES = 3


def _usage_record_priced_once(
    run: Run,
    stage: str,
    model_id: str,
    usage: Mapping[str, Any],
    metadata: Mapping[str, Any],
    now: datetime,
) -> UsageRecord:
    """Price with the kept catalog entry and insert in one statement; when the entry in force
    is no longer the one kept, reload the model's entries and try again."""
    for _ in range(_PRICE_TRIES):
        kept = selectors.catalog_prices.in_force(model_id=model_id, at=now)
        entry, price = (None, None) if kept is None else (kept.entry, kept.price)
        record = _usage_record_new(run, stage, model_id, usage, metadata, now, entry, price)
        if _usage_record_insert(record, stamp=None if kept is None else kept.stamp):
            return record
        selectors.catalog_prices.reload(model_id=model_id)
    entry = selectors.price_entry_in_force(model_id=model_id, at=now)
    price = None if entry is None else selectors.price_of(entry)
    record = _usage_record_new(run, stage, model_id, usage, metadata, now, entry, price)
    _usage_record_save(record)
    return record


def _usage_record_insert(record: UsageRecord, *, stamp: str | None) -> bool:
    """Insert the record and add it to its day's totals per model and per user, in one
    statement, if the catalog entry in force at its time still has ``stamp`` (None: no entry
    in force). Whether it did. A run deleted meanwhile leaves the record without its run."""
    params = _insert_params(record, stamp)
    try:
        inserted = _execute_once(params)
    except IntegrityError:
        # The run went between the statement's snapshot and its commit.
        if _run_exists(record):
            raise
        inserted = _execute_once({**params, "run_id": None})
    if inserted is None:
        return False
    record.pk, run_id = inserted
    if run_id is None:
        record.run = None
    return True


def _execute_once(params: dict[str, Any]) -> tuple[int, int | None] | None:
    def execute() -> tuple[int, int | None] | None:
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_SQL, params)
            row = cursor.fetchone()
        return None if row is None else (row[0], row[1])

    if connection.get_autocommit():
        return execute()  # one statement, its own transaction
    with transaction.atomic():  # a savepoint, as the ORM path
        return execute()


def _insert_params(record: UsageRecord, stamp: str | None) -> dict[str, Any]:
    names = [
        "thread_ref",
        "run_ref",
        "user_id",
        "stage",
        "model_id",
        "created_at",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_prompt_tokens",
        "prompt_cache_hit_tokens",
        "prompt_cache_miss_tokens",
        "reasoning_tokens",
        "latency_ms",
        "usage_complete",
        "direct_cost",
        "catalog_cost",
        "cost",
        "currency",
        "cost_source",
        "price_entry_id",
        "run_id",
    ]
    params = {name: getattr(record, name) for name in names}
    params.update(
        stage=str(record.stage),
        cost_source=str(record.cost_source),
        usage=json.dumps(record.usage),
        metadata=json.dumps(record.metadata),
        stamp=stamp,
        day=record.created_at.astimezone(UTC).date(),
        priced_calls=0 if record.cost is None else 1,
        day_input_tokens=record.input_tokens or 0,
        day_output_tokens=record.output_tokens or 0,
        day_total_tokens=record.total_tokens or 0,
        day_cost=record.cost or Decimal(0),
    )
    return params


_DAY_TOTALS_SET = ", ".join(
    f"{name} = d.{name} + EXCLUDED.{name}"
    for name in ("calls", "priced_calls", "input_tokens", "output_tokens", "total_tokens", "cost")
)
_INSERT_SQL = f"""
WITH record AS (
    INSERT INTO billing_usagerecord (
        run_id, thread_ref, run_ref, user_id, stage, model_id, created_at,
        input_tokens, output_tokens, total_tokens, cached_prompt_tokens,
        prompt_cache_hit_tokens, prompt_cache_miss_tokens, reasoning_tokens, latency_ms,
        usage_complete, direct_cost, catalog_cost, cost, currency, cost_source,
        price_entry_id, usage, metadata
    )
    SELECT
        (SELECT id FROM agent_runs_run WHERE id = %(run_id)s::bigint),
        %(thread_ref)s::uuid, %(run_ref)s::text, %(user_id)s::integer, %(stage)s::text,
        %(model_id)s::text, %(created_at)s::timestamptz,
        %(input_tokens)s::integer, %(output_tokens)s::integer, %(total_tokens)s::integer,
        %(cached_prompt_tokens)s::integer, %(prompt_cache_hit_tokens)s::integer,
        %(prompt_cache_miss_tokens)s::integer, %(reasoning_tokens)s::integer,
        %(latency_ms)s::integer, %(usage_complete)s::boolean, %(direct_cost)s::numeric,
        %(catalog_cost)s::numeric, %(cost)s::numeric, %(currency)s::text,
        %(cost_source)s::text, %(price_entry_id)s::bigint, %(usage)s::jsonb,
        %(metadata)s::jsonb
    WHERE (
        SELECT {selectors.CATALOG_STAMP_SQL % {"entry": "e"}}
        FROM billing_pricecatalogentry e
        WHERE e.model_id = %(model_id)s::text AND e.effective_from <= %(created_at)s::timestamptz
        ORDER BY e.effective_from DESC
        LIMIT 1
    ) IS NOT DISTINCT FROM %(stamp)s::text
    RETURNING id, run_id
),
by_model AS (
    INSERT INTO billing_modeldailyusage AS d (
        day, currency, model_id, calls, priced_calls, input_tokens, output_tokens,
        total_tokens, cost
    )
    SELECT %(day)s::date, %(currency)s::text, %(model_id)s::text, 1, %(priced_calls)s::integer,
        %(day_input_tokens)s::bigint, %(day_output_tokens)s::bigint,
        %(day_total_tokens)s::bigint, %(day_cost)s::numeric
    FROM record
    ON CONFLICT (day, model_id, currency) DO UPDATE SET {_DAY_TOTALS_SET}
),
by_user AS (
    INSERT INTO billing_userdailyusage AS d (
        day, currency, user_id, calls, priced_calls, input_tokens, output_tokens,
        total_tokens, cost
    )
    SELECT %(day)s::date, %(currency)s::text, %(user_id)s::integer, 1, %(priced_calls)s::integer,
        %(day_input_tokens)s::bigint, %(day_output_tokens)s::bigint,
        %(day_total_tokens)s::bigint, %(day_cost)s::numeric
    FROM record
    ON CONFLICT (day, user_id, currency) DO UPDATE SET {_DAY_TOTALS_SET}
)
SELECT id, run_id FROM record
"""


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
    if result.added or result.changed:
        # Not needed for correctness (usage_record finds a stale entry), it saves the miss.
        selectors.catalog_prices.clear()
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
            cache_write_cost_per_token=tier.cache_write_cost_per_token,
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
