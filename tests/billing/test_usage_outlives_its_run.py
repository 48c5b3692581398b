"""Usage records outlive their run (deleted with its thread): what was billed stays, named by
the run's threadId and runId, in the admin and the costs totals."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from billing.models import UsageRecord
from billing.selectors import costs_report, run_usage_summary
from billing.services import usage_record
from tests.billing.conftest import DEEPSEEK_COST, DEEPSEEK_METADATA, DEEPSEEK_USAGE, run_for


def record_deepseek(run):
    return usage_record(
        run=run,
        stage="worker",
        model_id="deepseek/deepseek-chat",
        usage=DEEPSEEK_USAGE,
        metadata=DEEPSEEK_METADATA,
    )


@pytest.mark.django_db
def test_a_record_names_its_run_and_stays_when_the_thread_goes(client, alice_user, deepseek_price):
    run = run_for(alice_user)
    record = record_deepseek(run)
    today = timezone.now().date()
    before = costs_report(start=today, end=today)

    run.thread.delete()

    record.refresh_from_db()
    assert record.run_id is None
    assert (record.thread_ref, record.run_ref) == (run.thread_id, run.run_id)
    assert record.cost == DEEPSEEK_COST
    assert costs_report(start=today, end=today) == before
    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-12345!")
    client.force_login(staff)
    listing = client.get("/admin/billing/usagerecord/", {"q": run.run_id})
    assert listing.context["cl"].result_count == 1
    assert f"{run.run_id} (deleted)" in listing.content.decode()
    detail = client.get(f"/admin/billing/usagerecord/{record.pk}/change/")
    assert detail.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_call_that_ends_after_its_run_was_deleted_is_recorded_without_it(
    alice_user, deepseek_price
):
    run = run_for(alice_user)
    run.thread.delete()  # while the call was in flight

    record = record_deepseek(run)

    record.refresh_from_db()
    assert record.run_id is None and record.run_ref == run.run_id
    assert record.cost == DEEPSEEK_COST
    assert run_usage_summary(run=run).model_call_records == 0


@pytest.mark.django_db(transaction=True)
def test_the_migration_copies_each_records_run_ids(alice_user):
    executor = MigrationExecutor(connection)
    executor.migrate([("billing", "0001_initial")])
    old = executor.loader.project_state([("billing", "0001_initial")]).apps
    run = run_for(alice_user)
    old.get_model("billing", "UsageRecord").objects.create(
        run_id=run.pk,
        user_id=alice_user.pk,
        stage="worker",
        model_id="deepseek/deepseek-chat",
        usage_complete=True,
        currency="USD",
        cost_source="catalog_fallback",
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    record = UsageRecord.objects.get()
    assert (record.run_id, record.thread_ref, record.run_ref) == (
        run.pk,
        run.thread_id,
        run.run_id,
    )
