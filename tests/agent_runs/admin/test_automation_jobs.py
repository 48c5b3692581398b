"""Automation jobs in the admin: next run times, ``Run now``, the job's runs, and the same
rules as the API (a bad schedule or timezone is an error at its field, nothing saved)."""

import datetime

import pytest
from django.contrib.auth import get_user_model

from agent_runs.models import AutomationJob, Run, Thread
from agent_runs.services.automations import automation_job_create, automations_fire_due
from tests.conftest import send

pytestmark = pytest.mark.django_db

ADMIN = "/admin/agent_runs/automationjob/"


@pytest.fixture
def alice_user(alice_token):
    return get_user_model().objects.get(username="alice")


@pytest.fixture
def job(alice_user):
    return automation_job_create(
        owner=alice_user,
        name="digest",
        schedule="0 9 * * *",
        timezone="Europe/Berlin",
        prompt="Summarise my day.",
        now=datetime.datetime(2026, 3, 27, 12, tzinfo=datetime.UTC),
    )


def form(**fields):
    return {
        "name": "weekly",
        "description": "",
        "schedule": "0 8 * * 1",
        "timezone": "Europe/Berlin",
        "prompt": "Plan my week.",
        "thread_policy": "new",
        "enabled": "on",
        "catch_up": "skip",
        "multitask": "enqueue",
        "config": "{}",
        **fields,
    }


def test_a_jobs_page_shows_its_next_run_times_across_a_dst_change(staff_client, job):
    page = staff_client.get(f"{ADMIN}{job.pk}/change/").content.decode()
    # 09:00 in Berlin: 08:00 UTC, then 07:00 UTC from the spring change on 29 March.
    assert "2026-03-28 09:00 CET (2026-03-28 08:00 UTC)" in page
    assert "2026-03-29 09:00 CEST (2026-03-29 07:00 UTC)" in page
    listed = staff_client.get(ADMIN).content.decode()
    assert "digest" in listed and "0 9 * * *" in listed


def test_run_now_queues_a_run_shown_in_the_jobs_history(staff_client, job, redis_queue):
    response = send(
        lambda: staff_client.post(
            ADMIN, {"action": "run_now", "_selected_action": [str(job.pk)]}, follow=True
        )
    )
    run = Run.objects.get()
    assert f"Run {run.run_id} of job digest queued." in response.content.decode()
    assert run.automation_job == "digest" and run.thread.owner == job.owner
    assert redis_queue.count == 1

    automations_fire_due(now=datetime.datetime(2026, 3, 28, 8, 0, 5, tzinfo=datetime.UTC))
    page = staff_client.get(f"{ADMIN}{job.pk}/change/").content.decode()
    for made in Run.objects.all():
        assert made.run_id in page
    runs = staff_client.get("/admin/agent_runs/run/", {"q": "digest"})
    assert runs.context["cl"].result_count == 2
    assert "digest" in runs.content.decode()  # the runs' list names their job


def test_run_now_on_a_thread_its_owner_no_longer_has_is_an_error_not_a_500(staff_client, job):
    stranger = get_user_model().objects.create_user(username="stranger")
    AutomationJob.objects.filter(pk=job.pk).update(
        thread_policy=AutomationJob.ThreadPolicy.SAME,
        thread=Thread.objects.create(owner=stranger),
    )
    response = staff_client.post(
        ADMIN, {"action": "run_now", "_selected_action": [str(job.pk)]}, follow=True
    )
    assert response.status_code == 200
    assert "Job digest: its thread is not its owner&#x27;s" in response.content.decode()
    assert not Run.objects.exists()


def test_staff_create_a_job_with_its_first_due_time(staff_client, alice_user):
    response = staff_client.post(f"{ADMIN}add/", form(owner=alice_user.pk))
    assert response.status_code == 302, response.context["adminform"].form.errors
    job = AutomationJob.objects.get(name="weekly")
    assert job.next_run_at is not None
    assert job.next_run_at.astimezone(datetime.UTC).weekday() in (0, 6)  # Monday 08:00 Berlin


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"schedule": "0 8 * *"}, "schedule", "invalid schedule: a cron expression has 5 fields"),
        ({"timezone": "Berlin"}, "timezone", "invalid timezone: 'Berlin' is not an IANA"),
        ({"prompt": ""}, "prompt", "invalid prompt: a job on a schedule sends a prompt"),
        ({"owner": ""}, "schedule", "invalid schedule: a job runs on a schedule for its owner"),
    ],
)
def test_the_admin_refuses_what_the_api_refuses(staff_client, alice_user, fields, field, message):
    response = staff_client.post(f"{ADMIN}add/", form(**{"owner": alice_user.pk, **fields}))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors[field][0].startswith(message), errors
    assert not AutomationJob.objects.exists()


def test_a_saved_jobs_name_cannot_change(staff_client, job):
    staff_client.post(f"{ADMIN}{job.pk}/change/", form(owner=job.owner_id, name="renamed"))
    job.refresh_from_db()
    assert job.name == "digest"
