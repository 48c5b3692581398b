"""The rules a turn meets on a thread whose run waits on interrupts (POST /api/v1/agent/ag-ui):
each refusal is the exact 4xx in the AG-UI error shape, before any stream starts, with
nothing written; two answers at once, exactly one wins; the sweeper expires an unanswered
interrupt and frees its thread; a worker that dies while a run waits loses nothing. The runs
are done by a real RQ worker whose model is a loopback OpenAI-compatible server."""

import json
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from agent_runs.errors import (
    InterruptClosed,
    InterruptNotAnApproval,
    InterruptNotFound,
    ResumePayloadInvalid,
)
from agent_runs.models import CalendarEvent, Interrupt, Run, RunEvent
from agent_runs.services.interrupts import interrupt_answer, interrupts_expire
from tests.agent_runs.concurrency import at_once_behind_lock
from tests.agent_runs.protocols.agui.test_fuzz import FUZZ, JSON_VALUES, encode
from tests.conftest import send, start_worker, stop_process, wait_for, work_burst
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

AG_UI = "/api/v1/agent/ag-ui"
STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def body(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A body as an AG-UI client sends it: the whole conversation."""
    return {
        "threadId": thread_id,
        "runId": f"r-{uuid.uuid4().hex[:12]}",
        "messages": messages,
        "protocolVersion": "1.0.0",
        **extra,
    }


def post(client: Any, payload: dict[str, Any]) -> Any:
    """The POST as a client that takes JSON (202 once accepted): no stream to wait on."""
    return send(lambda: client.post(AG_UI, payload, format="json", HTTP_ACCEPT="application/json"))


class Interrupted:
    """A thread of alice's whose first run stopped on ``calls``."""

    def __init__(self, alice: Any, model: FakeOpenAI, queue: Any, calls: list[Any]) -> None:
        model.tool_call_turns = [calls]
        self.thread_id = str(uuid.uuid4())
        first = body(self.thread_id, [user("u1", "Put a standup in my calendar")])
        assert post(alice, first).status_code == 202
        work_burst(queue)
        self.run = Run.objects.get(run_id=first["runId"])
        self.interrupts = list(Interrupt.objects.filter(run=self.run).order_by("created_at"))
        # The conversation as the client holds it: the user's message, the calls' message.
        self.messages = [
            user("u1", "Put a standup in my calendar"),
            {"id": f"worker-{self.run.run_id}", "role": "assistant", "content": ""},
        ]

    def resume(self, *entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return body(self.thread_id, self.messages, resume=list(entries), **extra)


def approve(interrupt: Interrupt, **payload: Any) -> dict[str, Any]:
    return {
        "interruptId": interrupt.id,
        "status": "resolved",
        "payload": {"approved": True, **payload},
    }


@pytest.fixture
def interrupted(alice, fake_openai, redis_queue) -> Interrupted:
    return Interrupted(
        alice, fake_openai, redis_queue, [("call_c1", "calendar_create", json.dumps(STANDUP))]
    )


def nothing_written(thread: Interrupted, runs: int = 1) -> None:
    assert Run.objects.filter(thread_id=thread.thread_id).count() == runs
    assert set(Interrupt.objects.values_list("status", flat=True)) == {"pending"}


def test_the_run_stops_with_its_interrupt_stored_and_its_thread_waits(interrupted):
    (interrupt,) = interrupted.interrupts
    assert interrupted.run.status == Run.Status.COMPLETED
    assert interrupted.run.suspended_reply["decision"]["route"] == "use_tools"
    assert interrupt.kind == Interrupt.Kind.APPROVAL and interrupt.status == "pending"
    assert interrupt.arguments == STANDUP and interrupt.tool_name == "calendar_create"
    assert interrupt.expires_at > timezone.now() + timedelta(hours=23)
    assert not CalendarEvent.objects.exists()
    custom = RunEvent.objects.get(run=interrupted.run, type="CUSTOM")
    assert custom.payload["name"] == "run_interrupted"
    assert custom.payload["value"]["interrupts"][0]["id"] == interrupt.id


def test_a_new_user_message_is_refused_while_an_approval_is_open(alice, interrupted):
    (interrupt,) = interrupted.interrupts
    turn = body(interrupted.thread_id, [*interrupted.messages, user("u2", "Never mind")])

    response = post(alice, turn)

    assert response.status_code == 409
    assert response.json() == {"detail": f"thread has an open interrupt: {interrupt.id}"}
    nothing_written(interrupted)


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        ({"approved": "yes"}, "at payload.approved: 'yes' is not of type 'boolean'"),
        ({}, "at payload: 'approved' is a required property"),
        (
            {"approved": True, "arguments": {"title": 5, "start": "tomorrow 09:00"}},
            "at payload.arguments.title: 5 is not of type 'string'",
        ),
    ],
    ids=["not-a-boolean", "no-answer", "edited-arguments-invalid"],
)
def test_a_payload_that_fails_the_response_schema_is_422(alice, interrupted, payload, detail):
    (interrupt,) = interrupted.interrupts
    entry = {"interruptId": interrupt.id, "status": "resolved", "payload": payload}

    response = post(alice, interrupted.resume(entry))

    assert response.status_code == 422
    assert response.json() == {
        "detail": f'invalid resume payload for interrupt "{interrupt.id}" {detail}'
    }
    nothing_written(interrupted)


def test_an_unknown_interrupt_is_404_and_a_strangers_thread_too(alice, bob, interrupted):
    (interrupt,) = interrupted.interrupts
    unknown = {**approve(interrupt), "interruptId": "int-0000"}

    response = post(alice, interrupted.resume(unknown))
    stranger = post(bob, interrupted.resume(approve(interrupt)))

    assert response.status_code == 404
    assert response.json() == {"detail": 'interrupt "int-0000" not found'}
    assert stranger.status_code == 404
    nothing_written(interrupted)


def test_a_resume_that_leaves_an_interrupt_unanswered_is_422_naming_it(
    alice, fake_openai, redis_queue
):
    both = [
        ("call_a", "calendar_create", json.dumps(STANDUP)),
        ("call_b", "calendar_create", json.dumps({**STANDUP, "title": "Retro"})),
    ]
    thread = Interrupted(alice, fake_openai, redis_queue, both)
    first, second = thread.interrupts
    outcome = RunEvent.objects.get(run=thread.run, type="CUSTOM").payload["value"]
    assert [item["id"] for item in outcome["interrupts"]] == [first.id, second.id]

    response = post(alice, thread.resume(approve(first)))

    assert response.status_code == 422
    assert response.json() == {
        "detail": f"resume must answer every open interrupt; missing: {second.id}"
    }
    nothing_written(thread)
    # Both answered: both calls ran, the second declined.
    declined = {"interruptId": second.id, "status": "resolved", "payload": {"approved": False}}
    assert post(alice, thread.resume(approve(first), declined)).status_code == 202
    work_burst(redis_queue)
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]


def test_an_answered_interrupt_cannot_be_answered_again(alice, interrupted, redis_queue):
    (interrupt,) = interrupted.interrupts
    assert post(alice, interrupted.resume(approve(interrupt))).status_code == 202
    work_burst(redis_queue)

    again = post(alice, interrupted.resume(approve(interrupt)))

    assert again.status_code == 409
    assert again.json() == {"detail": f'interrupt "{interrupt.id}" is not open: it is resolved'}
    assert CalendarEvent.objects.count() == 1


def test_two_answers_at_once_exactly_one_wins(alice, interrupted, redis_queue):
    (interrupt,) = interrupted.interrupts
    answers = [interrupted.resume(approve(interrupt)) for _ in range(2)]

    calls = [partial(post, alice, answer) for answer in answers]
    outcomes = at_once_behind_lock(uuid.UUID(interrupted.thread_id), calls)

    assert sorted(outcome.status_code for outcome in outcomes) == [202, 409]
    winner = next(b for b, o in zip(answers, outcomes, strict=True) if o.status_code == 202)
    interrupt.refresh_from_db()
    assert interrupt.answered_by.run_id == winner["runId"]
    assert Run.objects.filter(thread_id=interrupted.thread_id).count() == 2
    work_burst(redis_queue)
    assert CalendarEvent.objects.count() == 1


def test_an_expired_interrupt_is_410_and_the_sweeper_frees_its_thread(
    alice, interrupted, redis_queue
):
    (interrupt,) = interrupted.interrupts
    Interrupt.objects.filter(pk=interrupt.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    late = post(alice, interrupted.resume(approve(interrupt)))
    assert late.status_code == 410
    assert late.json() == {"detail": f'interrupt "{interrupt.id}" has expired'}
    # The worker's sweep closes it (a worker sweeps as it starts, then every
    # AGENT_RUN_SWEEP_SECONDS); nothing is left to expire after.
    work_burst(redis_queue)
    assert interrupts_expire() == 0
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.EXPIRED
    assert post(alice, interrupted.resume(approve(interrupt))).status_code == 410
    # The thread takes new messages again.
    turn = body(interrupted.thread_id, [*interrupted.messages, user("u2", "Something else")])
    assert post(alice, turn).status_code == 202


def test_a_cancelled_interrupt_goes_on_as_declined(alice, interrupted, redis_queue, fake_openai):
    (interrupt,) = interrupted.interrupts
    entry = {"interruptId": interrupt.id, "status": "cancelled"}

    assert post(alice, interrupted.resume(entry)).status_code == 202
    work_burst(redis_queue)

    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.CANCELLED
    assert not CalendarEvent.objects.exists()
    results = [
        m["content"]
        for r in fake_openai.requests
        for m in r["body"]["messages"]
        if m.get("role") == "tool"
    ]
    assert len(results) == 1 and "denied" in results[0].lower()


def test_client_tool_rules(alice, fake_openai, redis_queue):
    weather = {"name": "get_weather", "description": "The weather.", "parameters": {}}
    fake_openai.tool_call_turns = [[("call_w", "get_weather", json.dumps({"city": "Rome"}))]]
    thread_id = str(uuid.uuid4())
    asked = body(thread_id, [user("u1", "Weather in Rome?")], tools=[weather])
    assert post(alice, asked).status_code == 202
    work_burst(redis_queue)
    held = [user("u1", "Weather in Rome?"), {"id": f"worker-{asked['runId']}", "role": "assistant"}]

    clashing = [{**weather, "name": "calendar_list"}]
    clash = post(alice, body(thread_id, [*held, user("u2", "Hi")], tools=clashing))
    busy = post(alice, body(thread_id, [*held, user("u2", "Hello?")]))
    unknown = post(
        alice,
        body(
            thread_id, [*held, {"id": "t1", "role": "tool", "toolCallId": "nope", "content": "?"}]
        ),
    )

    assert clash.status_code == 422
    assert clash.json() == {"detail": 'RunAgentInput.tools: "calendar_list" is a backend tool'}
    assert busy.status_code == 409
    assert busy.json() == {"detail": "thread has pending tool calls: call_w"}
    assert unknown.status_code == 422
    assert unknown.json()["detail"].startswith('RunAgentInput.messages: tool call "nope"')
    assert Run.objects.filter(thread_id=thread_id).count() == 1
    # A new message that answers the pending call is taken: the call is closed with it.
    answer = {"id": "t1", "role": "tool", "toolCallId": "call_w", "content": "Rainy"}
    assert post(alice, body(thread_id, [*held, answer, user("u2", "Thanks")])).status_code == 202
    assert Interrupt.objects.get(tool_call_id="call_w").status == Interrupt.Status.RESOLVED


def test_a_worker_killed_while_a_run_waits_loses_nothing(alice, redis_queue):
    with FakeOpenAI() as model:
        model.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
        model.answer = ["Done."]
        env = {
            "AGENT_WORKER_MODEL": "openai/gpt-test",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
        }
        process = start_worker(**env)
        thread_id = str(uuid.uuid4())
        messages = [user("u1", "Put a standup in my calendar")]
        try:
            first = body(thread_id, messages)
            assert post(alice, first).status_code == 202
            # The run has ended on its interrupt: it waits, and no process holds it. (A
            # worker's start takes seconds on a busy machine.)
            wait_for(
                lambda: Run.objects.get(run_id=first["runId"]).status == "completed", seconds=90
            )
        finally:
            process.kill()  # no warm stop: the worker is gone
            process.wait()
        interrupt = Interrupt.objects.get()
        assert interrupt.status == Interrupt.Status.PENDING
        messages.append({"id": f"worker-{first['runId']}", "role": "assistant"})
        resumed = body(thread_id, messages, resume=[approve(interrupt)])
        assert post(alice, resumed).status_code == 202
        process = start_worker(**env)
        try:
            wait_for(
                lambda: Run.objects.get(run_id=resumed["runId"]).status == "completed", seconds=90
            )
        finally:
            stop_process(process)
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]


RESUME_ENTRIES = st.lists(
    st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries(
            {
                "interruptId": st.one_of(st.text(max_size=50), JSON_VALUES),
                "status": st.one_of(st.sampled_from(["resolved", "cancelled"]), JSON_VALUES),
            },
            optional={"payload": JSON_VALUES, "metadata": JSON_VALUES},
        ),
    ),
    max_size=3,
)
TOOLS = st.lists(
    st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries(
            {"name": st.one_of(st.text(max_size=80), JSON_VALUES), "description": st.text()},
            optional={"parameters": JSON_VALUES},
        ),
    ),
    max_size=3,
)


def test_fuzzed_resume_and_tools_never_fail_the_server_and_write_nothing_when_refused(
    alice, interrupted
):
    (interrupt,) = interrupted.interrupts

    @given(resume=st.one_of(RESUME_ENTRIES, JSON_VALUES), tools=st.one_of(TOOLS, JSON_VALUES))
    @FUZZ
    def answers(resume: Any, tools: Any) -> None:
        payload = interrupted.resume(tools=tools)
        payload["resume"] = resume
        raw = encode(payload, ascii_only=True)
        runs = Run.objects.count()
        response = send(
            lambda: alice.generic(
                "POST", AG_UI, raw, content_type="application/json", HTTP_ACCEPT="application/json"
            )
        )
        assert response.status_code < 500, response.content
        if response.status_code >= 400:
            assert isinstance(response.json()["detail"], str)
            assert Run.objects.count() == runs
            interrupt.refresh_from_db()
            assert interrupt.status == Interrupt.Status.PENDING
        else:  # only an answer of the open interrupt goes through: put it back
            assert response.status_code == 202
            Run.objects.filter(run_id=payload["runId"]).delete()
            Interrupt.objects.filter(pk=interrupt.pk).update(
                status="pending", answer=None, answered_by=None, closed_at=None
            )

    answers()


def test_interrupts_answered_one_by_one_outside_a_run_go_on_once_all_are(
    alice, bob, fake_openai, redis_queue
):
    both = [
        ("call_a", "calendar_create", json.dumps(STANDUP)),
        ("call_b", "calendar_create", json.dumps({**STANDUP, "title": "Retro"})),
    ]
    thread = Interrupted(alice, fake_openai, redis_queue, both)
    first, second = thread.interrupts
    owner = thread.run.thread.owner
    stranger = get_user_model().objects.get(username="bob")

    with pytest.raises(InterruptNotFound):
        interrupt_answer(user=stranger, interrupt_id=first.id, payload={"approved": True})
    with pytest.raises(ResumePayloadInvalid):
        interrupt_answer(user=owner, interrupt_id=first.id, payload={"approved": 1})
    answered, run = interrupt_answer(user=owner, interrupt_id=first.id, payload={"approved": True})
    assert answered.status == Interrupt.Status.RESOLVED and run is None
    with pytest.raises(InterruptClosed):
        interrupt_answer(user=owner, interrupt_id=first.id, payload={"approved": True})
    # The thread still waits on the other one; the answered one is closed for every client.
    again = post(alice, thread.resume(approve(first)))
    assert again.status_code == 409
    assert post(alice, body(thread.thread_id, [*thread.messages, user("u2", "?")])).json() == {
        "detail": f"thread has an open interrupt: {second.id}"
    }

    _, run = interrupt_answer(user=owner, interrupt_id=second.id, payload={"approved": False})

    assert run is not None and run.continues_id == thread.run.pk
    assert run.parent_run_id == thread.run.run_id and run.status == Run.Status.QUEUED
    work_burst(redis_queue)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
    assert set(Interrupt.objects.values_list("answered_by", flat=True)) == {run.pk}
    # The thread takes new messages again.
    turn = body(thread.thread_id, [*thread.messages, user("u2", "Thanks")])
    assert post(alice, turn).status_code == 202


def test_a_client_tool_call_is_not_answered_as_an_approval(alice, fake_openai, redis_queue):
    weather = {"name": "get_weather", "description": "The weather.", "parameters": {}}
    fake_openai.tool_call_turns = [[("call_w", "get_weather", json.dumps({"city": "Rome"}))]]
    asked = body(str(uuid.uuid4()), [user("u1", "Weather in Rome?")], tools=[weather])
    assert post(alice, asked).status_code == 202
    work_burst(redis_queue)
    interrupt = Interrupt.objects.get()
    owner = interrupt.thread.owner

    with pytest.raises(InterruptNotAnApproval):
        interrupt_answer(user=owner, interrupt_id=interrupt.id, payload={"approved": True})
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.PENDING


def test_an_approval_is_read_and_answered_at_its_own_url(alice, bob, interrupted, redis_queue):
    (interrupt,) = interrupted.interrupts
    url = f"/api/v1/agent/interrupts/{interrupt.id}"

    read = alice.get(url)
    assert read.status_code == 200
    assert read.json()["status"] == "pending" and read.json()["continuedBy"] is None
    assert read.json()["toolName"] == "calendar_create" and read.json()["arguments"] == STANDUP
    for stranger_url in (url, "/api/v1/agent/interrupts/int-%00", "/api/v1/agent/interrupts/x" * 9):
        assert bob.get(stranger_url).status_code == 404
    assert bob.post(url, {"approved": True}, format="json").status_code == 404
    malformed = alice.generic("POST", url, b"{", content_type="application/json")
    assert malformed.status_code == 400
    # Read as every JSON body is: a NUL, which no answer could be stored with, is a 400.
    unstorable = alice.generic(
        "POST", url, b'{"approved": true, "reason": "a\\u0000b"}', content_type="application/json"
    )
    assert unstorable.status_code == 400
    assert unstorable.json() == {
        "detail": "invalid body.reason: strings must not contain NUL (\\u0000)"
    }
    refused = alice.post(url, {"approved": "sure"}, format="json")
    assert refused.status_code == 422
    assert refused.json()["detail"].endswith("at payload.approved: 'sure' is not of type 'boolean'")
    nothing_written(interrupted)

    answered = send(lambda: alice.post(url, {"approved": True, "reason": "ok"}, format="json"))

    assert answered.status_code == 200, answered.content
    continued_by = answered.json()["continuedBy"]
    assert answered.json()["status"] == "resolved"
    assert answered.json()["answer"] == {"payload": {"approved": True, "reason": "ok"}}
    run = Run.objects.get(run_id=continued_by)
    assert run.continues_id == interrupted.run.pk
    again = alice.post(url, {"approved": False}, format="json")
    assert again.status_code == 409
    assert again.json() == {"detail": f'interrupt "{interrupt.id}" is not open: it is resolved'}
    work_burst(redis_queue)
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
