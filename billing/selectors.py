"""Reads of billing: prices in force, a run's usage summary and digest, and the costs page's
totals, aggregated in SQL."""

from collections.abc import Iterable
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet, Sum
from django.db.models.expressions import RawSQL

from agent_runs.models import Run
from agent_runs.usage import RunModelCalls, RunUsageByModel, format_cost
from billing.models import ModelDailyUsage, PriceCatalogEntry, UsageRecord, UserDailyUsage
from billing.pricing import CallUsage, Price, PricedCall, PriceTier, summarise, usage_digest
from billing.schemas import CostSource, UsageSummary


def price_entry_in_force(*, model_id: str, at: datetime) -> PriceCatalogEntry | None:
    """The model's catalog entry in force at ``at`` (the latest that starts by then), with
    its tiers."""
    return (
        PriceCatalogEntry.objects.filter(model_id=model_id, effective_from__lte=at)
        .order_by("-effective_from")
        .prefetch_related("tiers")
        .first()
    )


# A catalog entry's prices as text: its id, currency and tiers. ``usage_record`` prices a call
# with a cached entry and inserts the call only if the entry in force still has this stamp.
# %(entry)s is the entry table's alias in the query that uses it.
CATALOG_STAMP_SQL = (
    "%(entry)s.id::text || ':' || %(entry)s.currency || ':' || coalesce(("
    "SELECT string_agg(concat_ws('/', t.id, coalesce(t.max_prompt_tokens::text, '-'), "
    "t.input_cost_per_token, t.output_cost_per_token, "
    "coalesce(t.cache_hit_cost_per_token::text, '-'), "
    "coalesce(t.cache_write_cost_per_token::text, '-')), ',' ORDER BY t.id) "
    "FROM billing_pricetier t WHERE t.entry_id = %(entry)s.id), '')"
)


@dataclass(frozen=True)
class PricedEntry:
    """A catalog entry as ``usage_record`` prices with it, and its stamp."""

    entry: PriceCatalogEntry
    price: Price
    stamp: str


class CatalogPrices:
    """The catalog entries of each model a process has priced, kept (PostgreSQL only).

    Kept until they prove stale: each insert of ``usage_record`` checks, in its own
    statement, that the entry in force is the one it priced with, unchanged
    (``CATALOG_STAMP_SQL``); if not, it inserts nothing and reloads the model's entries
    (``reload``). So a price change made anywhere (the admin, ``update_pricing_catalog``,
    another process) counts from the next call on, with no extra statement per call."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[PricedEntry, ...]] = {}

    def in_force(self, *, model_id: str, at: datetime) -> PricedEntry | None:
        """The model's entry in force at ``at``, as this process last read the catalog."""
        entries = self._entries.get(model_id)
        if entries is None:
            entries = self.reload(model_id=model_id)
        for entry in entries:  # the latest first
            if entry.entry.effective_from <= at:
                return entry
        return None

    def reload(self, *, model_id: str) -> tuple[PricedEntry, ...]:
        """Read the model's entries again (two queries)."""
        if len(self._entries) > 1000:  # model ids come from settings: a few
            self._entries.clear()
        rows = (
            PriceCatalogEntry.objects.filter(model_id=model_id)
            .annotate(stamp=RawSQL(CATALOG_STAMP_SQL % {"entry": "billing_pricecatalogentry"}, ()))
            .order_by("-effective_from")
            .prefetch_related("tiers")
        )
        entries = tuple(PricedEntry(row, price_of(row), row.stamp) for row in rows)
        self._entries[model_id] = entries
        return entries

    def clear(self) -> None:
        self._entries.clear()


catalog_prices = CatalogPrices()


def price_entries_latest(*, model_ids: Iterable[str]) -> dict[str, PriceCatalogEntry]:
    """Each model's latest entry (whatever its start), with its tiers."""
    latest: dict[str, PriceCatalogEntry] = {}
    entries = (
        PriceCatalogEntry.objects.filter(model_id__in=list(model_ids))
        .order_by("model_id", "-effective_from")
        .prefetch_related("tiers")
    )
    for entry in entries:
        latest.setdefault(entry.model_id, entry)
    return latest


# A stored tier's fields, as the pure pricing's tier has them.
_TIER_FIELDS = tuple(tier_field.name for tier_field in dataclass_fields(PriceTier))


def price_of(entry: PriceCatalogEntry) -> Price:
    """A catalog entry as the pure pricing functions take it."""
    return Price(
        currency=entry.currency,
        tiers=tuple(
            PriceTier(**{name: getattr(tier, name) for name in _TIER_FIELDS})
            for tier in entry.tiers.all()
        ),
    )


def run_usage_summary(*, run: Run, recorded_by: datetime | None = None) -> UsageSummary:
    """The run's ``usage_summary`` (docs/spec/sse-events-and-usage.md 5.3) and cost (5.4-5.6),
    from its usage records: ``cost`` is a ``Decimal``, or ``None`` when a call is unpriced.
    ``recorded_by``: only the records made by then (a protocol's final object counts the
    calls recorded by the run's end, so a replay tells what the live stream told, even when
    a call cut short by a cancel is recorded after it)."""
    if recorded_by is None and connection.vendor == "postgresql":
        # Every run's answer reads it: a statement of constant text (PostgreSQL's numeric
        # comes as Decimal; SQLite's money needs the ORM's converters).
        with connection.cursor() as cursor:
            cursor.execute(_RUN_CALLS, [run.pk])
            return summarise([_priced_row(row) for row in cursor.fetchall()])
    records = UsageRecord.objects.filter(run=run).order_by("id")
    if recorded_by is not None:
        records = records.filter(created_at__lte=recorded_by)
    return summarise([_priced_call(record) for record in records])


# A record's columns of its CallUsage. Its cache writes are no column: they are in its raw
# usage, and what they cost in its catalog cost.
_CALL_USAGE_FIELDS = tuple(
    field.name for field in dataclass_fields(CallUsage) if field.name != "cache_write_tokens"
)
_RUN_CALLS = (
    f"SELECT {', '.join(_CALL_USAGE_FIELDS)}, catalog_cost, currency "
    f"FROM {UsageRecord._meta.db_table} WHERE run_id = %s ORDER BY id"
)


def _priced_row(row: tuple[Any, ...]) -> PricedCall:
    """``_priced_call`` of a record read as ``_RUN_CALLS`` reads it."""
    width = len(_CALL_USAGE_FIELDS)
    return PricedCall(
        usage=CallUsage(**dict(zip(_CALL_USAGE_FIELDS, row[:width], strict=True))),
        catalog_cost=row[width],
        currency=row[width + 1],
    )


def run_usage_by_model(*, run_pk: int, recorded_by: datetime) -> RunUsageByModel:
    """The run's usage from the records made by ``recorded_by`` (the time its journal ended,
    so a replay tells what the live stream told), per model and in all."""
    records = UsageRecord.objects.filter(run_id=run_pk, created_at__lte=recorded_by)
    by_model: dict[str, list[PricedCall]] = {}
    every: list[PricedCall] = []
    for record in records.order_by("id"):
        call = _priced_call(record)
        by_model.setdefault(record.model_id, []).append(call)
        every.append(call)
    return RunUsageByModel(
        models=[(model_id, summarise(calls)) for model_id, calls in by_model.items()],
        run=summarise(every),
    )


def run_usage_digest(*, run: Run, any_records: bool = True) -> dict[str, Any]:
    """The usage fields of the run's ``TEXT_MESSAGE_END`` (spec 3.4): ``totalTokens``,
    ``cachedPromptTokens``, ``promptCacheHitTokens``, ``promptCacheMissTokens``,
    ``reasoningTokens``, ``costSource``, ``usageComplete``. A caller that knows the run has
    no records yet (only the demo model answered) says so and saves the query."""
    if not any_records:
        return usage_digest(summarise([]))
    return usage_digest(run_usage_summary(run=run))


def run_model_calls(*, run: Run) -> RunModelCalls:
    """The run's usage records and their summary, in one query (the admin's run timeline)."""
    records = list(UsageRecord.objects.filter(run=run).order_by("created_at", "id"))
    return RunModelCalls(
        records=records, summary=summarise([_priced_call(record) for record in records])
    )


def run_cost_display(*, run: Run) -> str:
    """The run's cost for the admin: ``"0.000123 USD (catalog_fallback, 3 calls)"``."""
    return usage_cost_display(run_usage_summary(run=run))


def usage_cost_display(summary: UsageSummary) -> str:
    """A usage summary's cost as ``run_cost_display`` words it."""
    calls = summary.model_call_records
    if not calls:
        return "no model calls recorded"
    source = CostSource(summary.cost_source).value
    if summary.cost is None:
        why = (
            f"{summary.unpriced_calls} of {calls} calls have no catalog price"
            if summary.unpriced_calls
            else "calls priced in different currencies"
        )
        return f"unknown: {why} ({source})"
    return f"{format_cost(summary.cost)} {summary.currency} ({source}, {calls} calls)"


def _priced_call(record: UsageRecord) -> PricedCall:
    return PricedCall(
        usage=CallUsage(**{name: getattr(record, name) for name in _CALL_USAGE_FIELDS}),
        catalog_cost=record.catalog_cost,
        currency=record.currency,
    )


# The costs page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CostRow:
    """Totals of one group (a day, a model, a user) in one currency. ``cost`` sums the known
    costs; ``unpriced_calls`` counts the calls whose cost is unknown."""

    key: str
    currency: str
    calls: int
    total_tokens: int
    cost: Decimal
    unpriced_calls: int


@dataclass(frozen=True)
class CostsReport:
    start: date
    end: date
    totals: list[CostRow]
    by_day: list[CostRow]
    by_model: list[CostRow]
    by_user: list[CostRow]


def costs_report(*, start: date, end: date) -> CostsReport:
    """Usage from ``start`` to ``end`` (UTC days, both included), totalled by day, by model and
    by user, each in its currency: four GROUP BY queries over the daily totals (a row per
    day and model, and per day and user), whatever the number of records."""
    per_model = ModelDailyUsage.objects.filter(day__gte=start, day__lte=end)
    per_user = UserDailyUsage.objects.filter(day__gte=start, day__lte=end)
    by_user = _grouped(per_user, "user_id")
    usernames = dict(
        get_user_model()
        .objects.filter(pk__in={int(row.key) for row in by_user})
        .values_list("pk", "username")
    )
    return CostsReport(
        start=start,
        end=end,
        totals=_grouped(per_model, None),
        by_day=sorted(_grouped(per_model, "day"), key=lambda row: (row.key, row.currency)),
        by_model=_grouped(per_model, "model_id"),
        by_user=[replace(row, key=str(usernames.get(int(row.key), row.key))) for row in by_user],
    )


def usage_in_period(*, start: date, end: date) -> QuerySet[UsageRecord]:
    """Usage records from the start of ``start`` to the end of ``end``, UTC."""
    since = datetime.combine(start, time.min, tzinfo=UTC)
    until = datetime.combine(end + timedelta(days=1), time.min, tzinfo=UTC)
    return UsageRecord.objects.filter(created_at__gte=since, created_at__lt=until)


def _grouped(
    totals: QuerySet[ModelDailyUsage] | QuerySet[UserDailyUsage], key: str | None
) -> list[CostRow]:
    fields = ["currency"] if key is None else [key, "currency"]
    rows = (
        totals.order_by()
        .values(*fields)
        .annotate(
            calls_sum=Sum("calls"),
            priced_sum=Sum("priced_calls"),
            tokens_sum=Sum("total_tokens"),
            cost_sum=Sum("cost"),
        )
    )
    result = [
        CostRow(
            key="total" if key is None else str(row[key]),
            currency=row["currency"],
            calls=row["calls_sum"],
            total_tokens=row["tokens_sum"] or 0,
            cost=row["cost_sum"] or Decimal(0),
            unpriced_calls=row["calls_sum"] - row["priced_sum"],
        )
        for row in rows
    ]
    return sorted(result, key=lambda row: (-row.cost, -row.calls, row.key))
