"""Calendar tools: the timezone priority (pure) and a tool call through a whole run."""

import json
from datetime import UTC, datetime

import pytest

from agent_runs.models import CalendarEvent, Message, Run, UserProfile, Visibility
from agent_runs.runtime.tools.calendar import (
    CalendarToolError,
    resolve_event_timezone,
    resolve_local_time,
)
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, work_burst
from tests.fake_llm import said

# What the tools do, as they run at once (the calendar's writes wait for approval by
# default in chat mode: tests/agent_runs/protocols/agui/test_interrupts.py).
pytestmark = pytest.mark.usefixtures("tools_without_approval")

CLIENT_TIME = {
    "device_timezone": "America/Los_Angeles",
    "client_now_iso": "2026-03-16T09:12:33-07:00",
    "client_epoch_ms": 1773677553000,
}


@pytest.mark.parametrize(
    ("explicit", "client_time", "profile", "expected"),
    [
        ("Asia/Shanghai", CLIENT_TIME, "Europe/Berlin", "Asia/Shanghai"),
        (None, CLIENT_TIME, "Europe/Berlin", "America/Los_Angeles"),
        (None, None, "Europe/Berlin", "Europe/Berlin"),
        (None, None, None, "UTC"),
    ],
)
def test_the_event_timezone_follows_the_spec_priority(explicit, client_time, profile, expected):
    assert (
        resolve_event_timezone(explicit=explicit, client_time=client_time, profile_timezone=profile)
        == expected
    )


def test_an_invalid_explicit_timezone_is_a_tool_error():
    with pytest.raises(CalendarToolError, match="not an IANA timezone"):
        resolve_event_timezone(explicit="Mars/Base", client_time=None, profile_timezone=None)


def test_tomorrow_at_nine_is_read_against_the_clients_now_in_the_event_zone():
    now = datetime.fromisoformat(str(CLIENT_TIME["client_now_iso"]))
    instant = resolve_local_time("tomorrow 09:00", zone="America/Los_Angeles", now=now)
    assert instant == datetime(2026, 3, 17, 16, 0, tzinfo=UTC)  # 09:00 PDT
    local = resolve_local_time("2026-03-17T09:00", zone="Asia/Shanghai", now=now)
    assert local == datetime(2026, 3, 17, 1, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
@pytest.mark.parametrize(
    ("arguments", "client_time", "profile_timezone", "expected_zone", "expected_utc"),
    [
        (
            {"title": "Standup", "start": "tomorrow 09:00", "event_timezone": "Asia/Shanghai"},
            CLIENT_TIME,
            "Europe/Berlin",
            "Asia/Shanghai",
            # The client's now is already 2026-03-17 00:12 in Shanghai: tomorrow is the 18th.
            datetime(2026, 3, 18, 1, 0, tzinfo=UTC),
        ),
        (
            {"title": "Standup", "start": "tomorrow 09:00"},
            CLIENT_TIME,
            "Europe/Berlin",
            "America/Los_Angeles",
            datetime(2026, 3, 17, 16, 0, tzinfo=UTC),
        ),
        (
            {"title": "Standup", "start": "2026-03-17T09:00"},
            None,
            "Europe/Berlin",
            "Europe/Berlin",
            datetime(2026, 3, 17, 8, 0, tzinfo=UTC),
        ),
        (
            {"title": "Standup", "start": "2026-03-17T09:00"},
            None,
            None,
            "UTC",
            datetime(2026, 3, 17, 9, 0, tzinfo=UTC),
        ),
    ],
)
def test_a_run_creates_a_calendar_event_in_each_timezone_case(
    alice,
    alice_token,
    redis_queue,
    daphne_port,
    fake_openai,
    arguments,
    client_time,
    profile_timezone,
    expected_zone,
    expected_utc,
):
    from django.contrib.auth import get_user_model

    if profile_timezone:
        owner = get_user_model().objects.get(username="alice")
        UserProfile.objects.create(user=owner, settings={"timezone": profile_timezone})
    props = {"runtime_mode": "chat"}
    if client_time:
        props["client_time"] = client_time
    fake_openai.tool_call_turns = [[("call_1", "calendar_create", json.dumps(arguments))]]
    body = run_input(forwardedProps=props)
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    event = CalendarEvent.objects.get()
    assert (event.starts_at, event.event_timezone, event.owner.username) == (
        expected_utc,
        expected_zone,
        "alice",
    )
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    tool_events = [f["data"] for f in stream.events if f["event"].startswith("TOOL_CALL")]
    assert [e["type"] for e in tool_events] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert {e.get("toolCallId", e.get("tool_call_id")) for e in tool_events} == {"call_1"}
    result = tool_events[-1]
    assert result["status"] == "success" and result["stage"] == "worker"
    assert result["tool_call_args"] == arguments
    assert json.loads(result["result"])["id"] == event.pk
    assert json.loads(result["result"])["event_timezone"] == expected_zone
    # The tool result went back to the model, which then answered.
    assert len(fake_openai.requests) == 2
    tool_message = Message.objects.get(run=run, role="tool")
    assert tool_message.metadata["tool_name"] == "calendar_create"
    # The tool message's own id, not the assistant message's (it names its call).
    assert tool_message.message_id == tool_message.metadata["message_id"] == "tool-call_1"
    assert tool_message.metadata["tool_call_id"] == "call_1"
    assert json.loads(tool_message.content)["id"] == event.pk
    assert not tool_message.visibility_mask & Visibility.UI_HISTORY  # never in the history
    assert tool_message.visibility_mask & Visibility.WORKER
    assert stream.types[-1] == "RUN_FINISHED"


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_failing_tool_reports_failure_and_the_agent_recovers(
    alice, alice_token, redis_queue, daphne_port, fake_openai
):
    fake_openai.tool_call_turns = [[("call_9", "calendar_delete", '{"event_id": 999}')]]
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    result = next(f["data"] for f in stream.events if f["event"] == "TOOL_CALL_RESULT")
    assert result["status"] == "failure"
    assert "no event 999" in result["error"]
    # The model saw the failure and answered anyway.
    tool_message = said(fake_openai.requests[1]["body"]["messages"])[-1]
    assert tool_message["role"] == "tool" and "no event 999" in str(tool_message["content"])
    assert stream.types[-1] == "RUN_FINISHED"


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_next_run_sees_what_the_tools_did(alice, redis_queue, fake_openai):
    arguments = {"title": "Standup", "start": "2026-03-17T09:00"}
    fake_openai.tool_call_turns = [[("call_1", "calendar_create", json.dumps(arguments))]]
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    post_run(
        alice,
        run_input(
            threadId=body["threadId"],
            messages=[{"id": "m2", "role": "user", "content": "Move it to ten."}],
        ),
    )
    work_burst(redis_queue)

    event = CalendarEvent.objects.get()
    prompt = fake_openai.requests[-1]["body"]["messages"]
    notes = [str(m["content"]) for m in prompt if m["role"] == "assistant"]
    assert any("[calendar_create result]" in note and f'"id": {event.pk}' in note for note in notes)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_offline_demo_model_calls_a_tool_on_request(
    alice, alice_token, redis_queue, daphne_port
):
    text = '/tool calendar_create {"title": "Demo", "start": "2026-03-17T09:00"}'
    body = run_input(messages=[{"id": "m1", "role": "user", "content": text}])
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    event = CalendarEvent.objects.get()
    assert event.title == "Demo" and event.event_timezone == "UTC"
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert [t for t in stream.types if t.startswith("TOOL_CALL")] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    answer = Message.objects.get(run=run, role="assistant").content
    assert answer.startswith("(demo model) The tool answered:") and f'"id": {event.pk}' in answer
