"""Automation jobs fired on a clock the test controls (``automations_fire_due(now=…)``): each
due time makes one ordinary ``automation`` run of the owner's, by the job's catch-up,
thread and multitask rules."""

import datetime
import json
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from agent_runs.models import AutomationJob, MultitaskStrategy, Run, RunEvent, UserProfile
from agent_runs.selectors.automations import automation_job_runs
from agent_runs.services.automations import (
    automation_job_create,
    automation_job_update,
    automations_fire_due,
)
from agent_runs.services.webhooks import user_webhook_set
from billing.models import Budget, UsageRecord
from tests.agent_runs.concurrency import in_threads, join
from tests.agent_runs.protocols.agui.test_interrupt_rules import STANDUP
from tests.agent_runs.push.receiver import PushReceiver
from tests.conftest import post_run, run_input, send, work_burst

UTC = datetime.UTC
RUNS = "/api/v1/agent/runs"


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0):
    return datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def alice_user(alice_token):
    return get_user_model().objects.get(username="alice")


def job_of(user, *, now, **fields):
    fields = {
        "name": "digest",
        "schedule": "0 9 * * *",
        "timezone": "Europe/Berlin",
        "prompt": "Summarise my day.",
        **fields,
    }
    return automation_job_create(owner=user, now=now, **fields)


def fire(now):
    return send(lambda: automations_fire_due(now=now))


@pytest.mark.django_db
def test_a_due_time_makes_one_automation_run_of_the_owner_with_the_prompt(alice_user):
    job = job_of(alice_user, now=at(2026, 1, 5, 6, 0))
    assert job.next_run_at == at(2026, 1, 5, 8, 0)  # 09:00 CET

    assert automations_fire_due(now=at(2026, 1, 5, 7, 59, 59)) == 0
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 20)) == 1
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 40)) == 0  # fired already

    run = Run.objects.get()
    assert run.thread.owner == alice_user
    assert run.runtime_mode == Run.RuntimeMode.AUTOMATION
    assert run.automation_job == "digest"
    assert run.status == Run.Status.QUEUED
    assert run.run_id == f"automation-{job.pk}-20260105T0800Z"
    message = run.messages.get()
    assert (message.role, message.content) == ("user", "Summarise my day.")
    assert run.client_time == {
        "device_timezone": "Europe/Berlin",
        "client_now_iso": "2026-01-05T09:00:00+01:00",
        "client_epoch_ms": int(at(2026, 1, 5, 8, 0).timestamp() * 1000),
    }
    assert run.request["automation"] == {
        "job": job.pk,
        "trigger": "schedule",
        "dueTimes": 1,
        "firstDueAt": "2026-01-05T08:00:00+00:00",
        "latestDueAt": "2026-01-05T08:00:00+00:00",
    }
    job.refresh_from_db()
    assert job.next_run_at == at(2026, 1, 6, 8, 0)
    assert job.last_run == run
    assert job.last_outcome == f"run {run.run_id} for 1 due time"


@pytest.mark.django_db
def test_the_firing_follows_berlin_across_the_spring_and_autumn_changes(alice_user):
    job = job_of(alice_user, now=at(2026, 3, 28, 12), schedule="30 2 * * *")
    fired_at = []
    for now in (at(2026, 3, 29, 1, 0, 30), at(2026, 3, 30, 0, 30, 30)):
        assert automations_fire_due(now=now) == 1
        fired_at.append(Run.objects.latest("pk").request["automation"]["latestDueAt"])
    # 02:30 does not exist on 29 March: it fires at 03:00 CEST, then 02:30 CEST.
    assert fired_at == ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]

    job.delete()

    job = job_of(alice_user, now=at(2026, 10, 24, 12), schedule="30 2 * * *")
    assert automations_fire_due(now=at(2026, 10, 25, 0, 30, 30)) == 1  # 02:30 CEST
    # 02:30 comes again at 01:30 UTC (CET): not a second time.
    assert automations_fire_due(now=at(2026, 10, 25, 1, 30, 30)) == 0
    job.refresh_from_db()
    assert job.next_run_at == at(2026, 10, 26, 1, 30)


@pytest.mark.django_db
def test_missed_times_make_no_run_when_the_job_skips_them(alice_user, settings):
    settings.AUTOMATION_MISSED_AFTER_SECONDS = 300
    job = job_of(alice_user, now=at(2026, 1, 5, 5, 30), schedule="0 * * * *", timezone="UTC")
    # Workers down from 06:00 to 09:10: 06:00, 07:00, 08:00, 09:00 were due; 09:00 is
    # 10 minutes late, past the 5 allowed.
    assert automations_fire_due(now=at(2026, 1, 5, 9, 10)) == 0
    job.refresh_from_db()
    assert job.last_outcome == "skipped: 4 due times missed (catch-up: skip)"
    assert job.next_run_at == at(2026, 1, 5, 10, 0)
    assert not Run.objects.exists()

    # Down again from 10:00 to 12:01: 12:00 is on time, 10:00 and 11:00 are missed.
    assert automations_fire_due(now=at(2026, 1, 5, 12, 1)) == 1
    assert Run.objects.get().request["automation"]["dueTimes"] == 1
    assert Run.objects.get().request["automation"]["latestDueAt"] == "2026-01-05T12:00:00+00:00"


@pytest.mark.django_db
def test_missed_times_together_make_one_run_when_the_job_catches_up_once(alice_user):
    job_of(
        alice_user,
        now=at(2026, 1, 5, 5, 30),
        schedule="0 * * * *",
        timezone="UTC",
        catch_up=AutomationJob.CatchUp.ONCE,
    )
    assert automations_fire_due(now=at(2026, 1, 5, 9, 10)) == 1
    assert automations_fire_due(now=at(2026, 1, 5, 9, 20)) == 0
    run = Run.objects.get()
    assert run.request["automation"] | {"job": None} == {
        "job": None,
        "trigger": "schedule",
        "dueTimes": 4,
        "firstDueAt": "2026-01-05T06:00:00+00:00",
        "latestDueAt": "2026-01-05T09:00:00+00:00",
    }


@pytest.mark.django_db
def test_a_rejecting_job_skips_a_due_time_while_its_previous_run_is_going(alice_user):
    job = job_of(
        alice_user,
        now=at(2026, 1, 5, 5, 30),
        schedule="0 * * * *",
        multitask=MultitaskStrategy.REJECT,
    )
    assert automations_fire_due(now=at(2026, 1, 5, 6, 0, 5)) == 1
    first = Run.objects.get()
    assert automations_fire_due(now=at(2026, 1, 5, 7, 0, 5)) == 0  # the first still queued
    job.refresh_from_db()
    assert job.last_outcome == (
        "skipped: the job's previous run is still queued, running or paused"
    )
    assert job.last_run == first
    assert job.next_run_at == at(2026, 1, 5, 8, 0)

    Run.objects.filter(pk=first.pk).update(status=Run.Status.COMPLETED)
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 1
    assert Run.objects.count() == 2


@pytest.mark.django_db
def test_an_enqueueing_job_queues_its_run_behind_the_previous_one(alice_user):
    job_of(
        alice_user,
        now=at(2026, 1, 5, 5, 30),
        schedule="0 * * * *",
        thread_policy=AutomationJob.ThreadPolicy.SAME,
    )
    for hour in (6, 7, 8):
        assert automations_fire_due(now=at(2026, 1, 5, hour, 0, 5)) == 1
    runs = list(Run.objects.order_by("created_at"))
    assert [run.status for run in runs] == [Run.Status.QUEUED] * 3
    assert len({run.thread_id for run in runs}) == 1  # one thread, the earlier runs its context
    assert AutomationJob.objects.get().thread_id == runs[0].thread_id
    assert runs[0].thread.last_seq == 3


@pytest.mark.django_db
def test_a_new_thread_job_makes_a_thread_per_run(alice_user):
    job_of(alice_user, now=at(2026, 1, 5, 5, 30), schedule="0 * * * *")
    for hour in (6, 7):
        automations_fire_due(now=at(2026, 1, 5, hour, 0, 5))
    assert Run.objects.values("thread_id").distinct().count() == 2
    assert AutomationJob.objects.get().thread_id is None


@pytest.mark.django_db
def test_a_due_time_over_the_owners_budget_makes_no_run_and_says_why(alice_user):
    job = job_of(alice_user, now=at(2026, 1, 5, 6, 0))
    Budget.objects.create(user=alice_user, daily_limit=Decimal("0"))
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 0
    job.refresh_from_db()
    assert job.last_outcome.startswith("skipped: budget exceeded")
    assert job.next_run_at == at(2026, 1, 6, 8, 0)  # the next time tries again
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_disabled_job_does_not_fire_and_on_enabling_does_not_catch_up(alice_user):
    job = job_of(alice_user, now=at(2026, 1, 5, 6, 0), catch_up=AutomationJob.CatchUp.ONCE)
    job = automation_job_update(job=job, enabled=False, now=at(2026, 1, 5, 6, 0))
    assert job.next_run_at is None
    assert automations_fire_due(now=at(2026, 1, 8, 12, 0)) == 0
    job = automation_job_update(job=job, enabled=True, now=at(2026, 1, 8, 12, 0))
    assert job.next_run_at == at(2026, 1, 9, 8, 0)
    assert automations_fire_due(now=at(2026, 1, 8, 12, 0)) == 0


@pytest.mark.django_db(transaction=True)
def test_firing_at_once_from_several_connections_makes_each_run_once(alice_user, redis_queue):
    for index in range(6):
        job_of(alice_user, now=at(2026, 1, 5, 6, 0), name=f"job-{index}")
    now = at(2026, 1, 5, 8, 0, 10)
    threads, outcomes = in_threads([lambda: automations_fire_due(now=now)] * 4)
    join(threads)

    assert all(isinstance(made, int) for made in outcomes), outcomes
    assert sum(outcomes) == 6
    assert Run.objects.count() == 6
    assert sorted(Run.objects.values_list("automation_job", flat=True)) == [
        f"job-{index}" for index in range(6)
    ]
    assert set(AutomationJob.objects.values_list("next_run_at", flat=True)) == {
        at(2026, 1, 6, 8, 0)
    }
    assert redis_queue.count == 6  # each enqueued once, on its commit


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_fired_run_is_an_ordinary_run_streamed_and_billed_to_the_owner(
    alice_user, redis_queue, fake_openai
):
    job_of(alice_user, now=at(2026, 1, 5, 6, 0))
    assert fire(at(2026, 1, 5, 8, 0, 5)) == 1
    work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED
    types = list(RunEvent.objects.filter(run=run).order_by("id").values_list("type", flat=True))
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert UsageRecord.objects.filter(run=run, user=alice_user).exists()


@pytest.mark.django_db
def test_an_automation_run_names_only_its_owners_job_or_a_shared_one(alice_user, bob, alice):
    job_of(alice_user, now=at(2026, 1, 5, 6, 0), config={"context": "alice's private notes"})
    naming = run_input(
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "digest"}],
    )
    assert post_run(bob, naming).status_code == 422  # alice's job is not found for bob
    assert post_run(alice, naming).status_code == 202

    AutomationJob.objects.create(name="shared-digest", config={})
    shared = run_input(
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "shared-digest"}],
    )
    assert post_run(bob, shared).status_code == 202


@pytest.mark.django_db
def test_a_job_that_cannot_fire_stops_and_says_why_and_the_others_still_fire(alice_user):
    broken = job_of(alice_user, now=at(2026, 1, 5, 6, 0), name="broken")
    job_of(alice_user, now=at(2026, 1, 5, 6, 0), name="fine")
    # Written around the checks (a row edited in the database): not a timezone.
    AutomationJob.objects.filter(pk=broken.pk).update(timezone="Mars/Olympus")

    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 1
    broken.refresh_from_db()
    assert broken.last_outcome == "failed: ScheduleInvalid"
    assert broken.next_run_at is None  # not again at every sweep
    assert list(Run.objects.values_list("automation_job", flat=True)) == ["fine"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_fired_run_stopping_on_an_approval_is_pushed_to_the_owners_webhook(
    alice_user, redis_queue, fake_openai, settings
):
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    fake_openai.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    tool = {"name": "calendar_create", "requires_approval": True}
    job_of(alice_user, now=at(2026, 1, 5, 6, 0), config={"enabled_tools": [tool]})
    with PushReceiver() as receiver:
        profile = UserProfile.objects.create(user=alice_user)
        user_webhook_set(profile=profile, url=receiver.url)
        receiver.secret = profile.webhook_secret
        assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 1
        work_burst(redis_queue)

    (request,) = receiver.received
    assert request.signed and request.body["type"] == "interrupt.opened"
    assert request.body["interrupt"]["runId"] == Run.objects.get().run_id
    assert request.body["interrupt"]["toolName"] == "calendar_create"


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_redis_restart_after_firing_loses_no_run_and_fires_nothing_twice(
    alice_user, redis_queue, fake_openai
):
    job_of(alice_user, now=at(2026, 1, 5, 6, 0))
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 1
    redis_queue.connection.flushdb()  # Redis came back without its data: the job is gone
    assert redis_queue.count == 0

    # The claim is PostgreSQL's: the due time does not fire again.
    assert automations_fire_due(now=at(2026, 1, 5, 8, 1)) == 0
    work_burst(redis_queue)  # the worker's recovery enqueues the queued run again

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED
    assert run.request["automation"]["latestDueAt"] == "2026-01-05T08:00:00+00:00"


@pytest.mark.django_db
def test_a_change_saved_from_a_copy_read_before_a_firing_does_not_fire_it_again(alice_user):
    job = job_of(alice_user, now=at(2026, 1, 5, 6, 0))
    read_before = AutomationJob.objects.get(pk=job.pk)  # an API request or an admin form
    assert automations_fire_due(now=at(2026, 1, 5, 8, 0, 5)) == 1

    automation_job_update(job=read_before, prompt="Summarise my week.", now=at(2026, 1, 5, 8, 1))
    assert automations_fire_due(now=at(2026, 1, 5, 8, 1)) == 0
    job.refresh_from_db()
    assert job.next_run_at == at(2026, 1, 6, 8, 0)
    assert job.prompt == "Summarise my week."
    assert job.last_run == Run.objects.get()


@pytest.mark.django_db
def test_a_jobs_runs_are_its_owners_and_a_shared_jobs_those_of_users_without_their_own(
    alice_user, alice, bob
):
    own = job_of(alice_user, now=at(2026, 1, 5, 6, 0), name="digest")
    shared = AutomationJob.objects.create(name="digest", config={})
    naming = {
        "forwardedProps": {"runtime_mode": "automation"},
        "context": [{"description": "automation_job", "value": "digest"}],
    }
    # Not enqueued (no commit in this test's transaction): the runs stay queued.
    alices = alice.post(RUNS, run_input(**naming), format="json").json()["runId"]
    bobs = bob.post(RUNS, run_input(**naming), format="json").json()["runId"]

    assert [run.run_id for run in automation_job_runs(job=own)] == [alices]
    assert [run.run_id for run in automation_job_runs(job=shared)] == [bobs]


@pytest.mark.django_db
def test_an_interrupting_same_thread_job_cancels_the_run_holding_its_thread(
    alice_user, redis_queue
):
    job_of(
        alice_user,
        now=at(2026, 1, 5, 5, 30),
        schedule="0 * * * *",
        thread_policy=AutomationJob.ThreadPolicy.SAME,
        multitask=MultitaskStrategy.INTERRUPT,
    )
    assert fire(at(2026, 1, 5, 6, 0, 5)) == 1
    assert fire(at(2026, 1, 5, 7, 0, 5)) == 1
    first, second = Run.objects.order_by("created_at")
    assert first.status == Run.Status.CANCELLED
    assert (second.status, second.multitask) == (Run.Status.QUEUED, "interrupt")
    assert first.thread_id == second.thread_id
