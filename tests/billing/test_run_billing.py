"""Runs through a real worker against the loopback provider end with their model calls
recorded and priced (docs/spec/sse-events-and-usage.md, 3.4 and 5), failed runs included."""

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from agent_runs.models import Run, RunEvent
from agent_runs.runtime import turn
from agent_runs.runtime.usage import RunUsage
from agent_runs.services.lifecycle import run_complete_journaled
from agent_runs.services.steps import agent_step_advance_journaled
from billing import services as billing_services
from billing.models import UsageRecord
from billing.selectors import run_usage_summary
from tests.billing.conftest import DEEPSEEK_COST, DEEPSEEK_METADATA, price_entry
from tests.conftest import post_run, run_input, work_burst
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

DEEPSEEK = "deepseek/deepseek-chat"


@pytest.fixture
def deepseek(settings):
    """Every stage on DeepSeek at a loopback server that reports DeepSeek's usage fields."""
    with FakeOpenAI() as fake:
        fake.usage = DEEPSEEK_METADATA
        settings.DEEPSEEK_API_KEY = "sk-test"
        settings.DEEPSEEK_BASE_URL = fake.base_url
        settings.AGENT_ROUTER_MODEL = settings.AGENT_WORKER_MODEL = DEEPSEEK
        settings.AGENT_MEMORY_MODEL = DEEPSEEK
        settings.AGENT_MODEL_MAX_RETRIES = 0
        yield fake


def test_a_run_records_and_prices_every_model_call(alice, redis_queue, deepseek):
    price_entry(DEEPSEEK, (None, "0.00000028", "0.00000042", "0.000000028"))
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, run.error
    records = list(UsageRecord.objects.filter(run=run).order_by("pk"))
    assert [r.stage for r in records] == ["router", "worker", "memory"]
    assert len(records) == len(deepseek.requests)
    for record in records:
        assert record.model_id == DEEPSEEK and record.user.username == "alice"
        assert record.prompt_cache_hit_tokens == 1024 and record.prompt_cache_miss_tokens == 176
        assert record.total_tokens == 1500 and record.usage_complete
        assert record.cost == DEEPSEEK_COST and record.cost_source == "catalog_fallback"
        assert record.metadata["prompt_cache_hit_tokens"] == 1024  # the raw usage, kept
    summary = run_usage_summary(run=run)
    assert summary.cost == DEEPSEEK_COST * 3
    assert summary.model_call_records == summary.usage_records == 3

    # The wire digest covers the calls made before the answer: the router's and the worker's.
    end = RunEvent.objects.get(run=run, type="TEXT_MESSAGE_END").payload
    assert end["totalTokens"] == 3000
    assert end["cachedPromptTokens"] == end["promptCacheHitTokens"] == 2048
    assert end["promptCacheMissTokens"] == 352
    assert end["costSource"] == "catalog_fallback" and end["usageComplete"] is True
    assert not {"cost", "inputTokens", "outputTokens", "latencyMs", "model"} & set(end)


def test_each_stage_s_usage_is_committed_on_its_own_before_the_write_that_reports_it(
    alice, redis_queue, deepseek, monkeypatch
):
    """A record adds to its model's and its owner's day totals, rows every run of them shares:
    recorded in the transaction that ends a stage, it kept them locked, and every other
    run's records waiting, until that commit. Each is committed on its own: the router's
    beside the worker's reply, once the reply's first events are out (the boundary between
    them reports no usage, and the first token does not wait for the record), the worker's
    before the transaction that writes its answer's end (which reports the run's usage so
    far), the memory stage's before the run's end. Another connection sees them as those
    writes begin: the router's boundary, the answer's steps and the run's end (each one
    statement)."""
    seen: list[int] = []
    monkeypatch.setattr(
        turn, "agent_step_advance_journaled", _looking_first(seen, agent_step_advance_journaled)
    )
    monkeypatch.setattr(
        turn, "run_complete_journaled", _looking_first(seen, run_complete_journaled)
    )
    price_entry(DEEPSEEK, (None, "0.00000028", "0.00000042", "0.000000028"))
    post_run(alice, run_input())
    work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, run.error
    # The router's end (none yet), the worker's answer (the router's and its own), the end.
    assert seen == [0, 2, 3]


def _looking_first(seen: list[int], write: Callable[..., Any]) -> Callable[..., Any]:
    """``write``, once another connection has counted the usage records committed."""

    def looked(**kwargs: Any) -> Any:
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        with psycopg.connect(**params) as other:
            counted = other.execute("SELECT count(*) FROM billing_usagerecord").fetchone()
        seen.append(counted[0] if counted else 0)
        return write(**kwargs)

    return looked


def test_a_record_whose_connection_the_database_cut_is_made_once_on_a_new_one(
    alice, redis_queue, deepseek, monkeypatch
):
    """The router's record meets a connection the database has cut (its backend ends
    itself): the boundary is tried again on a new connection, and each call is recorded
    once, none lost."""
    record = billing_services.usage_record
    cut: list[str] = []

    def record_after_a_cut(**kwargs: Any) -> UsageRecord:
        if not cut:
            cut.append(kwargs["stage"])
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return record(**kwargs)

    monkeypatch.setattr(billing_services, "usage_record", record_after_a_cut)
    post_run(alice, run_input())
    work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, run.error
    assert cut == ["router"]
    stages = list(
        UsageRecord.objects.filter(run=run).order_by("pk").values_list("stage", flat=True)
    )
    assert stages == ["router", "worker", "memory"]


def test_usage_is_not_recorded_inside_a_caller_s_transaction(alice, redis_queue):
    post_run(alice, run_input())
    usage = RunUsage(run=Run.objects.get())
    with transaction.atomic(), pytest.raises(RuntimeError, match="outside the caller"):
        usage.store_kept()


def test_a_failed_run_is_billed_for_the_calls_it_made(alice, redis_queue, deepseek, settings):
    price_entry(DEEPSEEK, (None, "0.00000028", "0.00000042", "0.000000028"))
    with FakeOpenAI() as broken:
        broken.status = 500
        settings.AGENT_WORKER_MODEL = "openai/gpt-test"
        settings.OPENAI_API_KEY = "sk-test"
        settings.OPENAI_BASE_URL = broken.base_url
        post_run(alice, run_input())
        work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.FAILED
    [record] = UsageRecord.objects.filter(run=run)
    assert record.stage == "router" and record.cost == DEEPSEEK_COST


def test_a_model_without_a_catalog_price_is_recorded_unpriced_not_free(
    alice, redis_queue, deepseek
):
    post_run(alice, run_input())
    work_burst(redis_queue)

    run = Run.objects.get()
    records = UsageRecord.objects.filter(run=run)
    assert records.count() == 3
    assert all(r.cost is None and r.input_tokens == 1200 for r in records)
    assert run_usage_summary(run=run).cost is None
    assert Decimal(0) not in {r.cost for r in records}


def test_a_cancelled_run_is_billed_for_the_calls_it_made(alice, redis_queue, deepseek):
    """The router's call is recorded as it ends; cancelling the run while the worker's call
    is in flight (its work-horse is killed) leaves that record, priced."""
    from tests.agent_runs.services.test_run_cancel import cancel, wait_for
    from tests.conftest import start_worker, stop_process

    price_entry(DEEPSEEK, (None, "0.00000028", "0.00000042", "0.000000028"))
    with FakeOpenAI() as slow_model:
        slow_model.delay = 30
        worker = start_worker(
            AGENT_ROUTER_MODEL=DEEPSEEK,
            DEEPSEEK_API_KEY="sk-test",
            DEEPSEEK_BASE_URL=deepseek.base_url,
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=slow_model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            body = run_input()
            post_run(alice, body)
            wait_for(lambda: slow_model.requests)  # the worker's call is in flight
            assert cancel(alice, body["runId"]).json()["status"] == "cancelled"
        finally:
            stop_process(worker)

    run = Run.objects.get()
    assert run.status == Run.Status.CANCELLED
    [record] = UsageRecord.objects.filter(run=run)
    assert record.stage == "router" and record.cost == DEEPSEEK_COST
    assert run_usage_summary(run=run).cost == DEEPSEEK_COST
