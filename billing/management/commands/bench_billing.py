"""Benchmark: the cost of recording one model call's usage, and the costs page's queries over
``--records`` usage records (default 1,000,000).

PostgreSQL only (the records are seeded with one ``generate_series`` INSERT, and their daily
totals rebuilt from them). Everything it
makes belongs to users named ``bench-billing-*`` and the model ``bench/*`` catalog entries,
and is deleted at the end (``--keep`` keeps it for a later ``--reuse``). Run it on a
database of its own: the costs page's figures count whatever else is in the period too.
"""

import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.test import RequestFactory
from django.utils import timezone

from agent_runs.models import Run, Thread
from billing.admin import CostsAdmin, UsageRecordAdmin
from billing.benchmarks import CALL_METADATA, CALL_USAGE
from billing.catalog import CatalogPrice
from billing.models import (
    Costs,
    ModelDailyUsage,
    PriceCatalogEntry,
    UsageRecord,
    UserDailyUsage,
)
from billing.pricing import PriceTier
from billing.selectors import costs_report
from billing.services import daily_usage_rebuild, pricing_catalog_update, usage_record

PREFIX = "bench-billing-"
MODELS = [f"bench/model-{index}" for index in range(20)]
SPAN_DAYS = 90


class Command(BaseCommand):
    help = "Time usage_record per call and the costs page's queries over many usage records."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--records", type=int, default=1_000_000)
        parser.add_argument("--users", type=int, default=1000)
        parser.add_argument("--calls", type=int, default=500, help="usage_record calls to time")
        parser.add_argument("--repeat", type=int, default=5, help="runs of each page query")
        parser.add_argument("--keep", action="store_true", help="keep the seeded data")
        parser.add_argument("--reuse", action="store_true", help="use data kept by --keep")

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("bench_billing needs PostgreSQL: set DATABASE_URL")
        try:
            if not options["reuse"]:
                _cleanup()
                self._seed(options["users"], options["records"])
            self._time_usage_record(options["calls"])
            self._time_costs_page(options["repeat"])
        finally:
            if not options["keep"]:
                _cleanup()

    def _seed(self, users: int, records: int) -> None:
        started = time.perf_counter()
        _seed_catalog()
        with transaction.atomic():
            people, runs = _seed_runs(users)
            _insert_records(
                records,
                run_ids=[run.pk for run in runs],
                user_ids=[person.pk for person in people],
            )
        seeded = time.perf_counter()
        today = timezone.now().date()
        totals = daily_usage_rebuild(start=today - timedelta(days=SPAN_DAYS + 1), end=today)
        with connection.cursor() as cursor:
            for model in (UsageRecord, ModelDailyUsage, UserDailyUsage):
                cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
        self.stdout.write(
            f"seeded {records:,} usage records ({users} users, {len(MODELS)} models, "
            f"{SPAN_DAYS} days) in {seeded - started:.1f} s; their {totals:,} daily totals "
            f"rebuilt in {time.perf_counter() - seeded:.1f} s"
        )

    def _time_usage_record(self, calls: int) -> None:
        run = Run.objects.select_related("thread").filter(thread__owner__username=f"{PREFIX}0")[0]
        timings = []
        for index in range(calls):
            started = time.perf_counter()
            usage_record(
                run=run,
                stage="worker",
                model_id=MODELS[index % len(MODELS)],
                usage=CALL_USAGE,
                metadata=CALL_METADATA,
            )
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p50, p99 = timings[len(timings) // 2], timings[int(len(timings) * 0.99)]
        self.stdout.write(
            f"usage_record: {calls} calls, mean {statistics.fmean(timings):.2f} ms, "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        )

    def _time_costs_page(self, repeat: int) -> None:
        today = timezone.now().date()
        for days in (7, 30, SPAN_DAYS):
            start = today - timedelta(days=days - 1)
            with _query_log() as queries:
                elapsed = _median(repeat, partial(costs_report, start=start, end=today))
            per_run = len(queries) // (repeat + 1)
            slowest = max(queries[per_run:], default=0.0)  # past the warm-up
            calls = sum(row.calls for row in costs_report(start=start, end=today).totals)
            self.stdout.write(
                f"costs page queries, {days} days ({calls:,} records): median {elapsed:.0f} ms "
                f"for its {per_run} queries, slowest single query {slowest:.0f} ms"
            )
        self._time_admin_pages(repeat)

    def _time_admin_pages(self, repeat: int) -> None:
        from django.contrib import admin

        staff = get_user_model()(username=f"{PREFIX}staff", is_staff=True, is_superuser=True)
        factory = RequestFactory()
        pages: dict[str, Callable[[], Any]] = {
            "costs page (30 days, rendered)": lambda: _render(
                CostsAdmin(Costs, admin.site).changelist_view, factory, "?days=30", staff
            ),
            "costs CSV export (90 days)": lambda: _render(
                CostsAdmin(Costs, admin.site).changelist_view,
                factory,
                f"?days={SPAN_DAYS}&export=csv",
                staff,
            ),
            "usage records list (admin, rendered)": lambda: _render(
                UsageRecordAdmin(UsageRecord, admin.site).changelist_view, factory, "", staff
            ),
        }
        for name, page in pages.items():
            self.stdout.write(f"{name}: median {_median(repeat, page):.0f} ms")


def _render(view: Callable[..., Any], factory: RequestFactory, query: str, user: Any) -> None:
    request = factory.get(f"/admin/billing/{query}", HTTP_HOST="localhost")
    request.user = user
    response = view(request)
    if hasattr(response, "render"):
        response.render()
    if response.status_code != 200:
        raise CommandError(f"{query or 'list'} answered {response.status_code}")


def _seed_catalog() -> None:
    """A two-tier price for each benchmark model."""
    pricing_catalog_update(
        prices=[
            CatalogPrice(
                model_id=model_id,
                currency="USD",
                tiers=(
                    PriceTier(32_000, Decimal("0.0000004"), Decimal("0.0000012")),
                    PriceTier(None, Decimal("0.0000012"), Decimal("0.0000036")),
                ),
                source="bench",
            )
            for model_id in MODELS
        ]
    )


def _seed_runs(users: int) -> tuple[list[Any], list[Run]]:
    """``users`` users, each with a thread and one completed run."""
    user_model = get_user_model()
    people = user_model.objects.bulk_create(
        user_model(username=f"{PREFIX}{index}") for index in range(users)
    )
    threads = Thread.objects.bulk_create(Thread(owner=person) for person in people)
    runs = Run.objects.bulk_create(
        Run(
            thread=thread,
            run_id=f"bench-{uuid.uuid4().hex[:12]}",
            runtime_mode=Run.RuntimeMode.CHAT,
            status=Run.Status.COMPLETED,
            input={},
            input_sha256="",
        )
        for thread in threads
    )
    return people, runs


def _insert_records(count: int, *, run_ids: list[int], user_ids: list[int]) -> None:
    """One INSERT … SELECT: run and user by row number, 20 models, created over the last
    90 days, about 1% without a price."""
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_RECORDS,
            {
                "runs": run_ids,
                "users": user_ids,
                "models": MODELS,
                "span": SPAN_DAYS * 86400,
                "count": count,
            },
        )


_INSERT_RECORDS = f"""
    INSERT INTO {UsageRecord._meta.db_table} (
        run_id, run_ref, user_id, stage, model_id, created_at, input_tokens, output_tokens,
        total_tokens, cached_prompt_tokens, prompt_cache_hit_tokens,
        prompt_cache_miss_tokens, reasoning_tokens, latency_ms, usage_complete,
        catalog_cost, cost, currency, cost_source, usage, metadata
    )
    SELECT
        (%(runs)s::bigint[])[1 + g %% cardinality(%(runs)s::bigint[])],
        'bench',
        (%(users)s::bigint[])[1 + g %% cardinality(%(users)s::bigint[])],
        'worker',
        (%(models)s::text[])[1 + (g * 7) %% cardinality(%(models)s::text[])],
        now() - make_interval(secs => (g::bigint * 7919) %% %(span)s),
        1000 + g %% 3000, 100 + g %% 500, 1100 + g %% 3000 + g %% 500, g %% 1000,
        g %% 1000, 1000 + g %% 3000 - g %% 1000, 0, 500 + g %% 5000, true,
        c.cost, c.cost, 'USD', 'catalog_fallback',
        '{{}}'::jsonb, '{{}}'::jsonb
    FROM generate_series(1, %(count)s) AS g
    CROSS JOIN LATERAL (
        SELECT CASE WHEN g %% 100 = 0 THEN NULL
               ELSE ((1000 + g %% 3000) * 0.0000004 + (100 + g %% 500) * 0.0000012)
               END::numeric(30, 15) AS cost
    ) AS c
"""


def _cleanup() -> None:
    """Delete the benchmark's users, runs, records and catalog entries."""
    users = get_user_model().objects.filter(username__startswith=PREFIX)
    with connection.cursor() as cursor:
        # A million rows through the ORM's cascade would collect them all in memory first.
        cursor.execute(
            f"DELETE FROM {UsageRecord._meta.db_table} WHERE user_id = ANY(%s)",
            [list(users.values_list("pk", flat=True))],
        )
    users.delete()
    PriceCatalogEntry.objects.filter(model_id__in=MODELS).delete()
    ModelDailyUsage.objects.filter(model_id__in=MODELS).delete()


def _median(repeat: int, work: Callable[[], Any]) -> float:
    work()  # warm-up: plans and caches
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


@contextmanager
def _query_log() -> Iterator[list[float]]:
    """The duration (ms) of each query run inside, warm-up excluded by the caller."""
    durations: list[float] = []

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            durations.append((time.perf_counter() - started) * 1000)

    with connection.execute_wrapper(timed):
        yield durations
