"""A usage record and its day's totals in one PostgreSQL statement, priced with the catalog
entry this process keeps, if that entry is still the one in force."""

import json
from datetime import UTC
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, connection, transaction

from agent_runs.models import Run
from billing import selectors
from billing.models import UsageRecord


def run_exists(record: UsageRecord) -> bool:
    return Run.objects.filter(pk=record.run_id or 0).exists()


def usage_record_insert(record: UsageRecord, *, stamp: str | None) -> bool:
    """Insert the record and add it to its day's totals per model and per user, in one
    statement, if the catalog entry in force at its time still has ``stamp`` (None: no entry
    in force). Whether it did. A run deleted meanwhile leaves the record without its run."""
    params = _insert_params(record, stamp)
    try:
        inserted = _execute_once(params)
    except IntegrityError:
        # The run went between the statement's snapshot and its commit.
        if run_exists(record):
            raise
        inserted = _execute_once({**params, "run_id": None})
    if inserted is None:
        return False
    record.pk, run_id = inserted
    if run_id is None:
        record.run = None
    return True


# The record's columns passed as they are; the others are converted below.
_RECORD_COLUMNS = (
    *("thread_ref", "run_ref", "user_id", "stage", "model_id", "created_at"),
    *("input_tokens", "output_tokens", "total_tokens", "cached_prompt_tokens"),
    *("prompt_cache_hit_tokens", "prompt_cache_miss_tokens", "reasoning_tokens"),
    *("latency_ms", "usage_complete", "direct_cost", "catalog_cost", "cost", "currency"),
    *("cost_source", "price_entry_id", "run_id"),
)


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
    params = {name: getattr(record, name) for name in _RECORD_COLUMNS}
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
