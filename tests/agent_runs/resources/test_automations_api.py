"""``/api/v1/agent/automations``: the owner's automation jobs over REST. Invalid input is a 422
naming the field, with nothing written; another user's job is a 404."""

import pytest

from agent_runs.models import AutomationJob, Run
from tests.conftest import send

pytestmark = pytest.mark.django_db

BASE = "/api/v1/agent/automations"
JOB = {
    "name": "morning-digest",
    "schedule": "0 9 * * 1-5",
    "timezone": "Europe/Berlin",
    "prompt": "What is on my calendar today?",
}


def create(client, **fields):
    response = client.post(BASE, {**JOB, **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_the_owner_creates_reads_lists_changes_and_deletes_a_job(alice):
    job = create(alice, config={"enabled_tools": ["calendar_list"]})
    per_stage = {"router": {}, "worker": {"enabled_tools": ["calendar_list"]}, "memory": {}}
    assert create(alice, name="per-stage", config=per_stage)["config"] == per_stage
    alice.delete(f"{BASE}/{alice.get(BASE).json()['automations'][1]['id']}")
    assert job["name"] == "morning-digest"
    assert job["threadPolicy"] == "new" and job["catchUp"] == "skip"
    assert job["multitask"] == "enqueue" and job["enabled"] is True
    assert job["nextRunAt"] is not None and job["lastRunId"] is None

    assert alice.get(f"{BASE}/{job['id']}").json() == job
    assert alice.get(BASE).json() == {"automations": [job]}

    changed = alice.patch(
        f"{BASE}/{job['id']}",
        {"enabled": False, "multitask": "reject", "threadPolicy": "same"},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["nextRunAt"] is None
    assert (changed.json()["multitask"], changed.json()["threadPolicy"]) == ("reject", "same")
    assert changed.json()["prompt"] == JOB["prompt"]

    assert alice.delete(f"{BASE}/{job['id']}").status_code == 204
    assert alice.get(f"{BASE}/{job['id']}").status_code == 404
    assert not AutomationJob.objects.exists()


def test_a_changed_schedule_moves_the_next_run(alice):
    job = create(alice, schedule="0 9 * * *", timezone="UTC")
    changed = alice.patch(
        f"{BASE}/{job['id']}", {"schedule": "0 21 * * *", "timezone": "Asia/Tokyo"}, format="json"
    ).json()
    assert changed["nextRunAt"].endswith("T12:00:00Z")  # 21:00 in Tokyo


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"schedule": "0 9 * *"}, "invalid schedule: a cron expression has 5 fields"),
        ({"schedule": "0 25 * * *"}, "invalid schedule: '0 25 * * *' is not a valid cron"),
        ({"timezone": "Mars/Olympus"}, "invalid timezone: 'Mars/Olympus' is not an IANA"),
        ({"timezone": ""}, "invalid timezone:"),
        ({"threadPolicy": "sometimes"}, "invalid threadPolicy:"),
        ({"catchUp": "all"}, "invalid catchUp:"),
        ({"multitask": "shout"}, "invalid multitask:"),
        ({"name": "not a slug"}, "invalid name:"),
        ({"prompt": ""}, "invalid prompt:"),
        ({"config": {"enabled_tools": ["rm_rf"]}}, "invalid config: router stage: unknown tools"),
        ({"config": {"tools": []}}, "invalid config: router stage: tools: Extra inputs"),
        ({"cron": "* * * * *"}, "invalid cron: unknown field"),
        (
            {"config": {"mcp_servers": [{"name": "mine", "url": "https://example.com/mcp"}]}},
            "invalid config: mcp_servers are configured by staff only",
        ),
        (
            {"config": {"router": {}, "worker": {"mcp_servers": []}}},
            "invalid config: mcp_servers are configured by staff only",
        ),
        ({"config": {"worker": {}}}, "invalid config: router stage: worker: Extra inputs"),
        ({"prompt": "hi\u0000"}, None),
    ],
)
def test_invalid_input_is_a_422_naming_the_field_and_writes_nothing(alice, fields, detail):
    response = alice.post(BASE, {**JOB, **fields}, format="json")
    if detail is None:  # what no stored text may hold: the body is refused as it is read
        assert response.status_code == 400, response.content
        assert (
            response.json()["detail"]
            == "invalid body.prompt: strings must not contain NUL (\\u0000)"
        )
    else:
        assert response.status_code == 422, response.content
        assert response.json()["detail"].startswith(detail), response.json()
    assert not AutomationJob.objects.exists()


def test_an_invalid_change_is_a_422_and_keeps_the_job_as_it_was(alice):
    job = create(alice)
    for body, field in (
        ({"schedule": "every day"}, "schedule"),
        ({"timezone": "Berlin"}, "timezone"),
        ({"name": "renamed"}, "name"),
    ):
        response = alice.patch(f"{BASE}/{job['id']}", body, format="json")
        assert response.status_code == 422, response.content
        assert response.json()["detail"].startswith(f"invalid {field}:")
    assert alice.get(f"{BASE}/{job['id']}").json() == job


def test_a_second_job_of_the_same_name_is_a_409_but_another_user_may_use_it(alice, bob):
    create(alice)
    response = alice.post(BASE, JOB, format="json")
    assert response.status_code == 409
    assert response.json()["detail"] == 'a job named "morning-digest" exists already'
    create(bob)
    assert AutomationJob.objects.count() == 2


def test_a_stranger_gets_404_for_every_route_of_another_users_job(alice, bob):
    job = create(alice)
    path = f"{BASE}/{job['id']}"
    assert bob.get(path).status_code == 404
    assert bob.patch(path, {"enabled": False}, format="json").status_code == 404
    assert bob.delete(path).status_code == 404
    assert send(lambda: bob.post(f"{path}/run")).status_code == 404
    assert bob.get(f"{path}/runs").status_code == 404
    assert bob.get(BASE).json() == {"automations": []}
    assert AutomationJob.objects.get().enabled is True
    assert not Run.objects.exists()


def test_a_shared_job_is_not_listed_nor_reachable(alice):
    shared = AutomationJob.objects.create(name="shared", config={})
    assert alice.get(BASE).json() == {"automations": []}
    assert alice.get(f"{BASE}/{shared.pk}").status_code == 404


def test_run_now_queues_an_automation_run_listed_among_the_jobs_runs(alice, redis_queue):
    job = create(alice)
    response = send(lambda: alice.post(f"{BASE}/{job['id']}/run"))
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "queued" and run["runtimeMode"] == "automation"
    assert run["automationJob"] == "morning-digest"
    assert run["runId"].startswith(f"automation-{job['id']}-manual-")
    assert redis_queue.count == 1

    runs = alice.get(f"{BASE}/{job['id']}/runs").json()
    assert [listed["runId"] for listed in runs["runs"]] == [run["runId"]]
    assert runs["next"] is None
    # The thread's list names the job its latest run ran (the console shows it).
    thread = alice.get(f"/api/v1/agent/threads/{run['threadId']}").json()
    assert thread["latestRun"]["automationJob"] == "morning-digest"
    assert thread["title"] == JOB["prompt"]
    after = alice.get(f"{BASE}/{job['id']}").json()
    assert after["lastRunId"] == run["runId"]
    assert after["nextRunAt"] == job["nextRunAt"]  # the schedule is unchanged


def test_run_now_of_a_rejecting_job_is_a_409_while_its_previous_run_is_going(alice):
    job = create(alice, multitask="reject")
    assert send(lambda: alice.post(f"{BASE}/{job['id']}/run")).status_code == 202
    response = send(lambda: alice.post(f"{BASE}/{job['id']}/run"))
    assert response.status_code == 409
    assert response.json() == {
        "detail": "the job's previous run is still queued, running or paused"
    }
    assert Run.objects.count() == 1


def test_the_runs_of_a_job_are_paged_newest_first(alice):
    job = create(alice)
    for _ in range(3):
        send(lambda: alice.post(f"{BASE}/{job['id']}/run"))
    first = alice.get(f"{BASE}/{job['id']}/runs", {"limit": 2}).json()
    second = alice.get(f"{BASE}/{job['id']}/runs", {"limit": 2, "cursor": first["next"]}).json()
    listed = [run["runId"] for run in first["runs"] + second["runs"]]
    newest_first = list(Run.objects.order_by("-created_at", "-pk").values_list("run_id", flat=True))
    assert listed == newest_first and second["next"] is None


def test_a_read_only_key_reads_jobs_but_cannot_write_them(alice, alice_token):
    from rest_framework.test import APIClient

    from agent_runs.services.tokens import api_token_create

    job = create(alice)
    reader = APIClient()
    key = api_token_create(username="alice", scopes=["read"])
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert reader.get(f"{BASE}/{job['id']}").status_code == 200
    assert reader.patch(f"{BASE}/{job['id']}", {"enabled": False}, format="json").status_code == 403
    assert reader.post(f"{BASE}/{job['id']}/run").status_code == 403
