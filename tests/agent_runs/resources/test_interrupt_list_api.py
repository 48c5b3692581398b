"""``GET /api/v1/agent/interrupts`` (docs/protocols/agui.md): the caller's interrupts as AG-UI
1.0 gives them, newest first, pending ones by default; a stranger's thread is a 404 and its
interrupts are never listed."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agent_runs.models import Interrupt, Run
from tests.agent_runs.resources.test_rest_api import new_thread, pages

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

INTERRUPTS = "/api/v1/agent/interrupts"
STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}
SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}


def interrupt_of(thread_id: str, run_id: str = "run-1", **fields: Any) -> Interrupt:
    """An approval interrupt of the thread's run, as a run that stopped on one stores it."""
    run = Run.objects.get(thread_id=thread_id, run_id=run_id)
    values: dict[str, Any] = {
        "id": f"int-{uuid.uuid4().hex}",
        "kind": Interrupt.Kind.APPROVAL,
        "reason": "tool_approval",
        "tool_call_id": f"call-{uuid.uuid4().hex[:8]}",
        "tool_name": "calendar_create",
        "arguments": STANDUP,
        "message": "Allow calendar_create to run with these arguments?",
        "response_schema": SCHEMA,
        "expires_at": timezone.now() + timedelta(hours=1),
        **fields,
    }
    return Interrupt.objects.create(thread_id=thread_id, run=run, **values)


def test_the_owner_sees_a_threads_pending_interrupt_as_agui_gives_it(alice, redis_queue):
    thread_id = new_thread(alice, runs=2)
    interrupt = interrupt_of(thread_id, run_id="run-2")

    response = alice.get(INTERRUPTS, {"threadId": thread_id})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["next"] is None
    (listed,) = body["interrupts"]
    created = listed.pop("createdAt")
    assert created.endswith("Z") and created.startswith(interrupt.created_at.date().isoformat())
    assert listed == {
        "id": interrupt.id,
        "reason": "tool_approval",
        "message": "Allow calendar_create to run with these arguments?",
        "toolCallId": interrupt.tool_call_id,
        "responseSchema": SCHEMA,
        "expiresAt": interrupt.expires_at.isoformat().replace("+00:00", "Z"),
        "metadata": {"toolName": "calendar_create", "arguments": STANDUP},
        "threadId": thread_id,
        "runId": "run-2",
        "kind": "approval",
        "status": "pending",
        "toolName": "calendar_create",
        "arguments": STANDUP,
    }


def test_without_a_thread_it_lists_every_thread_of_the_callers_newest_first(
    alice, bob, redis_queue
):
    first, second = new_thread(alice), new_thread(alice)
    older = interrupt_of(first)
    newer = interrupt_of(second, tool_name="calendar_delete")
    interrupt_of(new_thread(bob))  # a stranger's

    listed = alice.get(INTERRUPTS).json()["interrupts"]

    assert [(item["id"], item["threadId"]) for item in listed] == [
        (newer.id, second),
        (older.id, first),
    ]


def test_the_status_filter_picks_closed_interrupts_and_pending_is_the_default(alice, redis_queue):
    thread_id = new_thread(alice)
    pending = interrupt_of(thread_id)
    resolved = interrupt_of(thread_id, status=Interrupt.Status.RESOLVED)
    expired = interrupt_of(thread_id, status=Interrupt.Status.EXPIRED)

    def listed(**query: str) -> list[tuple[str, str]]:
        response = alice.get(INTERRUPTS, {"threadId": thread_id, **query})
        assert response.status_code == 200, response.content
        return [(item["id"], item["status"]) for item in response.json()["interrupts"]]

    assert listed() == [(pending.id, "pending")]
    assert listed(status="resolved") == [(resolved.id, "resolved")]
    assert listed(status="expired") == [(expired.id, "expired")]
    assert listed(status="cancelled") == []


def test_a_strangers_thread_is_a_404_and_its_interrupts_are_never_listed(alice, bob, redis_queue):
    thread_id = new_thread(alice)
    interrupt_of(thread_id)

    refused = bob.get(INTERRUPTS, {"threadId": thread_id})

    assert refused.status_code == 404
    assert refused.json() == {"detail": "Not found."}
    assert bob.get(INTERRUPTS).json() == {"interrupts": [], "next": None}
    assert len(alice.get(INTERRUPTS).json()["interrupts"]) == 1


@pytest.mark.parametrize(
    ("query", "status", "detail"),
    [
        ({"threadId": "not-a-uuid"}, 404, "Not found."),
        ({"threadId": str(uuid.uuid4())}, 404, "Not found."),
        (
            {"status": "open"},
            400,
            "status must be one of pending, resolved, cancelled, expired",
        ),
        ({"limit": "0"}, 400, "limit must be a whole number from 1 to 100"),
        (
            {"cursor": "r1.1"},
            400,
            "cursor is not valid: pass the next value of the page before",
        ),
    ],
    ids=["thread-not-a-uuid", "unknown-thread", "status", "limit", "another-lists-cursor"],
)
def test_a_query_it_cannot_read_is_refused(alice, redis_queue, query, status, detail):
    response = alice.get(INTERRUPTS, query)

    assert response.status_code == status
    assert response.json() == {"detail": detail}


def test_pages_follow_next_and_give_each_interrupt_once(alice, redis_queue):
    thread_id = new_thread(alice)
    made = [interrupt_of(thread_id) for _ in range(5)]
    # Two made in the same microsecond: the id orders them.
    Interrupt.objects.filter(pk__in=[made[1].pk, made[2].pk]).update(created_at=made[1].created_at)

    found = pages(alice, INTERRUPTS, "interrupts", threadId=thread_id, limit=2)

    assert [len(page) for page in found] == [2, 2, 1]
    ids = [item["id"] for page in found for item in page]
    expected = Interrupt.objects.order_by("-created_at", "-id").values_list("id", flat=True)
    assert ids == list(expected) and len(set(ids)) == 5


def test_anonymous_callers_are_refused(client):
    response = client.get(INTERRUPTS)

    assert response.status_code == 401
