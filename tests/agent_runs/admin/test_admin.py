import pytest
from django.contrib.auth import get_user_model

from agent_runs.models import Run
from tests.conftest import post_run, run_input, work_burst

pytestmark = pytest.mark.django_db


def test_staff_find_a_run_by_thread_id_and_read_its_messages(alice, staff_client, redis_queue):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])

    found = staff_client.get("/admin/agent_runs/run/", {"q": body["threadId"]})
    assert found.status_code == 200
    assert body["runId"] in found.content.decode()
    assert (
        staff_client.get("/admin/agent_runs/run/", {"q": "no-such-run"}).context["cl"].result_count
        == 0
    )

    page = staff_client.get(f"/admin/agent_runs/run/{run.pk}/change/")
    assert page.status_code == 200
    assert "What is on my calendar?" in page.content.decode()


def test_runs_filter_by_status_and_user(alice, bob, staff_client, redis_queue):
    post_run(alice, run_input())
    post_run(bob, run_input())
    alice_id = get_user_model().objects.get(username="alice").pk
    queued = staff_client.get("/admin/agent_runs/run/", {"status__exact": "queued"})
    completed = staff_client.get("/admin/agent_runs/run/", {"status__exact": "completed"})
    alices = staff_client.get("/admin/agent_runs/run/", {"thread__owner__id__exact": alice_id})
    assert queued.context["cl"].result_count == 2
    assert completed.context["cl"].result_count == 0
    assert alices.context["cl"].result_count == 1


def test_history_cannot_be_edited_in_the_admin(alice, staff_client, redis_queue):
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    response = staff_client.post(f"/admin/agent_runs/run/{run.pk}/change/", {"status": "failed"})
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_non_staff_session_cannot_open_the_admin(client, redis_queue):
    user = get_user_model().objects.create_user("dave", password="pw-12345!")
    client.force_login(user)
    response = client.get("/admin/agent_runs/run/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.django_db(transaction=True)
def test_a_runs_admin_page_shows_its_events_in_order(alice, staff_client, redis_queue):
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    run = Run.objects.get(run_id=body["runId"])

    page = staff_client.get(f"/admin/agent_runs/run/{run.pk}/change/").content.decode()
    raw = page[page.index('id="events-group"') :]  # the raw events, below the timeline

    positions = [raw.index(kind) for kind in ("RUN_STARTED", "TEXT_MESSAGE_END", "RUN_FINISHED")]
    assert positions == sorted(positions)
    assert "events (timeline)" in page.lower()


def test_staff_list_interrupts_by_status_user_and_tool(alice, bob, staff_client, redis_queue):
    from datetime import timedelta

    from django.utils import timezone

    from agent_runs.models import Interrupt

    runs = []
    for client in (alice, bob):
        body = run_input()
        post_run(client, body)
        runs.append(Run.objects.get(run_id=body["runId"]))
    soon = timezone.now() + timedelta(hours=1)
    for index, (run, tool, status) in enumerate(
        [
            (runs[0], "calendar_create", "pending"),
            (runs[0], "calendar_delete", "expired"),
            (runs[1], "calendar_create", "resolved"),
        ]
    ):
        Interrupt.objects.create(
            id=f"int-{index}",
            thread=run.thread,
            run=run,
            kind="approval",
            reason="tool_approval",
            tool_call_id=f"call_{index}",
            tool_name=tool,
            status=status,
            expires_at=soon,
        )
    alice_id = get_user_model().objects.get(username="alice").pk

    def count(**query: str | int) -> int:
        page = staff_client.get("/admin/agent_runs/interrupt/", query)
        assert page.status_code == 200
        return int(page.context["cl"].result_count)

    assert count() == 3
    assert count(status__exact="pending") == 1
    assert count(status__exact="expired") == 1
    assert count(tool_name__exact="calendar_create") == 2
    assert count(thread__owner__id__exact=alice_id) == 2
    page = staff_client.get("/admin/agent_runs/interrupt/int-0/change/")
    assert page.status_code == 200 and "calendar_create" in page.content.decode()
    assert staff_client.post("/admin/agent_runs/interrupt/int-0/change/", {}).status_code == 403
