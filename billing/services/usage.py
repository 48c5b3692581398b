"""A usage record per model call, priced with the catalog entry in force (docs/billing.md)."""

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection
from django.utils import timezone

from agent_runs import metrics
from agent_runs.models import Run
from billing import selectors
from billing.models import PriceCatalogEntry, UsageRecord
from billing.pricing import Price, call_cost, normalise_usage, price_call
from billing.services.daily import usage_record_store
from billing.services.usage_insert import run_exists, usage_record_insert


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
    call = _ModelCall(run, stage, model_id, usage, metadata, timezone.now())
    if connection.vendor == "postgresql":
        record = _usage_record_priced_once(call)
    else:
        record = _usage_record_priced_now(call)
    _usage_measure(record)
    return record


@dataclass(frozen=True)
class _ModelCall:
    """What ``usage_record`` was told of one model call, and when."""

    run: Run
    stage: str
    model_id: str
    usage: Mapping[str, Any]
    metadata: Mapping[str, Any]
    now: datetime


# The record's fields taken as they are from the normalised call.
_CALL_FIELDS = (
    *("input_tokens", "output_tokens", "total_tokens", "cached_prompt_tokens"),
    *("prompt_cache_hit_tokens", "prompt_cache_miss_tokens", "reasoning_tokens"),
    *("latency_ms", "usage_complete", "direct_cost"),
)


def _usage_record_new(
    call: _ModelCall, entry: PriceCatalogEntry | None, price: Price | None
) -> UsageRecord:
    """The call's record, priced with ``price`` (``entry``'s), not saved."""
    priced = price_call(
        normalise_usage(call.usage, call.metadata),
        price,
        default_currency=settings.BILLING_DEFAULT_CURRENCY,
    )
    cost, cost_source = call_cost(priced)
    run = call.run
    return UsageRecord(
        run=run,
        thread_ref=run.thread_id,
        run_ref=run.run_id,
        user_id=run.thread.owner_id,
        stage=call.stage,
        model_id=call.model_id,
        created_at=call.now,
        **{name: getattr(priced.usage, name) for name in _CALL_FIELDS},
        catalog_cost=priced.catalog_cost,
        cost=cost,
        currency=priced.currency,
        cost_source=cost_source,
        price_entry=entry,
        usage=_jsonable(call.usage),
        metadata=_jsonable(call.metadata),
    )


def _usage_record_priced_now(call: _ModelCall) -> UsageRecord:
    """Price with the entry in force read now, and save with the ORM (several statements)."""
    entry = selectors.price_entry_in_force(model_id=call.model_id, at=call.now)
    price = None if entry is None else selectors.price_of(entry)
    record = _usage_record_new(call, entry, price)
    try:
        usage_record_store(record)
    except IntegrityError:
        if run_exists(record):
            raise
        # The run's thread was deleted while the call ran (its job stopped late): the call
        # is billed all the same, still named by its thread_ref and run_ref.
        record.pk, record.run = None, None
        usage_record_store(record)
    return record


# Tries of the cached price before pricing as the ORM path does: each miss means the
# catalog changed between the reload and the insert.
_PRICE_TRIES = 3


def _usage_record_priced_once(call: _ModelCall) -> UsageRecord:
    """Price with the kept catalog entry and insert in one statement; when the entry in force
    is no longer the one kept, reload the model's entries and try again."""
    for _ in range(_PRICE_TRIES):
        kept = selectors.catalog_prices.in_force(model_id=call.model_id, at=call.now)
        entry, price = (None, None) if kept is None else (kept.entry, kept.price)
        record = _usage_record_new(call, entry, price)
        if usage_record_insert(record, stamp=None if kept is None else kept.stamp):
            return record
        selectors.catalog_prices.reload(model_id=call.model_id)
    return _usage_record_priced_now(call)


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
