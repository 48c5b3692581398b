"""AG-UI's single-request mode: a run's POST answered with the run's own event stream (what
AG-UI's HttpAgent expects), the conversation endpoint ``POST /api/v1/agent/ag-ui``, and a
client disconnect that cancels the run. Over real HTTP against daphne, with a real worker
process running the jobs."""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agent_runs.events.codec import Event
from agent_runs.models import Message, Run, RunEvent, Thread
from agent_runs.protocols.agui.outbound import ClientEvents
from agent_runs.protocols.agui.stream import ClientForm
from agent_runs.services.lifecycle import run_cancel
from billing.models import UsageRecord
from billing.selectors import format_cost, run_usage_summary
from tests.agent_runs.sse import SseStream, post_sse, read_sse
from tests.billing.conftest import price_entry
from tests.conftest import run_input, start_model_worker, start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

AG_UI = "/api/v1/agent/ag-ui"
RUNS = "/api/v1/agent/runs"


@pytest.fixture
def worker(redis_queue: Any) -> Iterator[None]:
    """A real worker process on the demo model."""
    process = start_worker()
    yield
    stop_process(process)


@pytest.fixture
def slow_model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """A real worker whose model takes 30 s to answer: a run stays mid-call."""
    with FakeOpenAI() as model:
        model.delay = 30
        process = start_worker(
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            yield model
        finally:
            model.delay = 0
            stop_process(process)
    # The worker shut down cleanly, though its last job was stopped by a cancel.
    assert process.returncode == 0


def journal(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    events = RunEvent.objects.filter(run__run_id=run_id).order_by("pk")
    return [(str(pk), payload) for pk, payload in events.values_list("pk", "payload")]


def client_stream(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's stored events as the AG-UI endpoint translates them (its usage included)."""
    run = Run.objects.get(run_id=run_id)
    events = [
        Event(row.pk, row.seq, json.dumps(row.payload), type=row.type, run_id=run_id, at=at)
        for row in RunEvent.objects.filter(run=run).order_by("pk")
        for at in [row.created_at]
    ]
    client_form = ClientForm(ClientEvents(run_input=run.input), run_pk=run.pk)
    async_to_sync(client_form.prepare)(events)
    return [(str(event.id), sent) for event in events for sent in client_form.events(event.payload)]


def sent(stream: SseStream) -> list[tuple[str, dict[str, Any]]]:
    return [(frame["id"], frame["data"]) for frame in stream.events]


def conversation(*messages: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A body as AG-UI's HttpAgent sends it: the whole conversation, an empty
    forwardedProps, its protocolVersion."""
    body = run_input(messages=list(messages), forwardedProps={}, protocolVersion="1.0.0")
    body.update(overrides)
    return body


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def test_a_post_asking_for_the_event_stream_is_answered_with_the_run_s_events(
    alice_token, daphne_port, worker
):
    body = run_input(messages=[user("m1", "/tool calendar_list")], protocolVersion="1.0.0")

    stream = post_sse(daphne_port, RUNS, body, token=alice_token)

    assert stream.status == 200, stream.body
    assert stream.headers["Content-Type"] == "text/event-stream"
    assert sent(stream) == journal(body["runId"])  # the spec's shape, exactly as stored
    assert stream.types[0] == "RUN_STARTED" and stream.types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in stream.types
    assert b"\r" not in stream.body  # frames split on "\n\n" only (HttpAgent's framing)
    assert Run.objects.get(run_id=body["runId"]).status == Run.Status.COMPLETED


def test_back_to_back_runs_of_a_thread_each_stream_every_event_from_its_run_started(
    alice_token, daphne_port, worker
):
    """The quick start's curl pasted again and again (a thread's runs one after the other),
    each run also followed by a GET stream opened while it starts: every stream, from the
    first frame, is its run's stored events, all of them, in order."""
    thread_id = run_input()["threadId"]
    followers: list[tuple[str, SseStream]] = []

    def follow(run_id: str) -> None:
        deadline = time.monotonic() + 10
        stream = read_sse(daphne_port, thread_id, token=alice_token, query={"runId": run_id})
        while stream.status == 404 and time.monotonic() < deadline:  # not stored yet
            stream = read_sse(daphne_port, thread_id, token=alice_token, query={"runId": run_id})
        followers.append((run_id, stream))

    posted = []
    for turn in range(20):
        body = run_input(threadId=thread_id)
        following = threading.Thread(target=follow, args=(body["runId"],))
        if turn % 2:
            following.start()
        posted.append((body["runId"], post_sse(daphne_port, RUNS, body, token=alice_token)))
        if turn % 2:
            following.join()

    assert len(followers) == 10
    for run_id, stream in posted + followers:
        assert stream.status == 200, stream.body
        assert sent(stream) == journal(run_id), run_id
        assert stream.types[0] == "RUN_STARTED" and stream.types[-1] == "RUN_FINISHED"


def test_a_post_asking_for_json_is_still_accepted_with_202(alice, daphne_port, redis_queue):
    for accept in ("application/json", None):
        headers = {"HTTP_ACCEPT": accept} if accept else {}
        response = alice.post(RUNS, run_input(), format="json", **headers)
        assert response.status_code == 202, response.content
        assert set(response.json()) == {"taskId", "threadId", "runId", "created"}


def test_a_bad_body_asking_for_the_stream_is_a_json_error_and_stores_nothing(
    alice_token, daphne_port
):
    body = run_input(messages=[user("m1", "x" * 10_001)])

    stream = post_sse(daphne_port, RUNS, body, token=alice_token)

    assert stream.status == 422
    assert stream.headers["Content-Type"] == "application/json"
    assert json.loads(stream.body) == {"detail": "RunAgentInput user message text exceeds limit"}
    assert not Thread.objects.exists()


def test_on_disconnect_takes_cancel_or_continue_only(alice_token, daphne_port):
    stream = post_sse(
        daphne_port, RUNS, run_input(), token=alice_token, query={"on_disconnect": "later"}
    )

    assert stream.status == 400
    assert json.loads(stream.body) == {"detail": "on_disconnect must be cancel or continue"}
    assert not Run.objects.exists()


def test_a_client_that_goes_away_mid_run_cancels_it(alice_token, daphne_port, slow_model):
    body = run_input()

    stream = post_sse(
        daphne_port,
        RUNS,
        body,
        token=alice_token,
        stop_when=lambda frame: frame.get("event") == "RUN_STARTED",
    )  # and the connection is closed
    closed = time.monotonic()

    assert stream.types == ["RUN_STARTED"]
    wait_for(lambda: Run.objects.get(run_id=body["runId"]).status == Run.Status.CANCELLED, 5)
    assert time.monotonic() - closed < 1.0
    wait_for(lambda: journal(body["runId"])[-1][1]["type"] == "RUN_ERROR", 5)
    assert journal(body["runId"])[-1][1]["code"] == "cancelled"
    assert not Message.objects.filter(run__run_id=body["runId"], role="assistant").exists()


def test_on_disconnect_continue_lets_the_run_go_on(alice_token, daphne_port, slow_model):
    body = run_input()

    post_sse(
        daphne_port,
        RUNS,
        body,
        token=alice_token,
        query={"on_disconnect": "continue"},
        stop_when=lambda frame: frame.get("event") == "RUN_STARTED",
    )
    wait_for(lambda: slow_model.requests)
    time.sleep(0.5)  # a cancel, had there been one, would have landed by now

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.RUNNING
    run_cancel(run=run)  # so the worker is free to shut down


def test_the_conversation_endpoint_takes_the_whole_conversation_every_turn(
    alice_token, daphne_port, worker
):
    first = conversation(user("u1", "/tool calendar_list"))
    thread_id = first["threadId"]

    one = post_sse(daphne_port, AG_UI, first, token=alice_token)
    # What the client now holds: its message, then one per message and tool call streamed.
    held = [user("u1", "/tool calendar_list")]
    for _id, event in sent(one):
        if event["type"] in ("TEXT_MESSAGE_START", "TOOL_CALL_RESULT"):
            held.append({"id": event["messageId"], "role": "assistant", "content": ""})
    second = conversation(*held, user("u2", "And tomorrow?"), threadId=thread_id)
    two = post_sse(daphne_port, AG_UI, second, token=alice_token)

    assert one.status == two.status == 200, (one.body, two.body)
    for stream, body in ((one, first), (two, second)):
        # The stored events, in the form AG-UI clients keep whole.
        assert sent(stream) == client_stream(body["runId"])
        assert stream.types[-1] == "RUN_FINISHED"
        assert sent(stream)[-1][1]["outcome"] == {"type": "success"}
    user_messages = Message.objects.filter(thread_id=thread_id, role="user")
    assert list(user_messages.values_list("message_id", flat=True)) == ["u1", "u2"]
    assert Run.objects.get(run_id=second["runId"]).runtime_mode == "chat"  # the default


def test_the_spec_fields_reach_an_agui_client_in_metadata(alice_token, daphne_port, worker):
    body = conversation(user("u1", "/tool calendar_list"))

    stream = post_sse(daphne_port, AG_UI, body, token=alice_token)

    by_type = {event["type"]: event for _id, event in sent(stream)}
    stored = {payload["type"]: payload for _id, payload in journal(body["runId"])}
    end, result = by_type["TEXT_MESSAGE_END"], by_type["TOOL_CALL_RESULT"]
    assert set(end) == {"type", "messageId", "metadata"}
    for field in ("answer", "ui_schema", "status", "totalTokens", "usageComplete"):
        assert end["metadata"][field] == stored["TEXT_MESSAGE_END"][field]
    for field in ("status", "result", "error", "tool_call_id"):
        assert result["metadata"][field] == stored["TOOL_CALL_RESULT"][field]
    # Nothing to move: the AG-UI version it speaks is added, and the input it ran on.
    run_input_echo = Run.objects.get(run_id=body["runId"]).input
    assert run_input_echo["messages"] == [user("u1", "/tool calendar_list")]
    assert by_type["RUN_STARTED"] == {
        **stored["RUN_STARTED"],
        "protocolVersion": "1.0",
        "input": run_input_echo,
    }


@pytest.mark.parametrize(
    ("messages", "status", "detail"),
    [
        (
            [user("u1", "hi"), {"id": "a9", "role": "assistant", "content": "made up"}],
            422,
            "RunAgentInput.messages must end with the new user message",
        ),
        (
            [{"id": "a9", "role": "assistant", "content": "made up"}, user("u2", "hi")],
            422,
            'RunAgentInput.messages: message "a9" is not in this thread',
        ),
        (
            [user("u1", "hi"), user("u2", "")],
            422,
            "invalid RunAgentInput.messages[1].content: the message is empty",
        ),
    ],
)
def test_a_conversation_that_is_not_the_thread_s_is_a_clear_4xx(
    alice_token, daphne_port, messages, status, detail
):
    stream = post_sse(daphne_port, AG_UI, conversation(*messages), token=alice_token)

    assert stream.status == status
    assert json.loads(stream.body) == {"detail": detail}
    assert not Thread.objects.exists()


def test_a_repeated_user_message_is_a_conflict(alice, alice_token, daphne_port, redis_queue):
    first = conversation(user("u1", "hi"))
    assert alice.post(AG_UI, first, format="json", HTTP_ACCEPT="application/json").status_code == (
        202
    )
    again = conversation(user("u1", "hi"), threadId=first["threadId"])  # a new runId

    stream = post_sse(daphne_port, AG_UI, again, token=alice_token)

    assert stream.status == 409
    assert json.loads(stream.body) == {
        "detail": 'RunAgentInput.messages: the new user message "u1" is already in this thread'
    }
    assert Run.objects.count() == 1
    assert list(Message.objects.values_list("message_id", flat=True)) == ["u1"]
    assert not RunEvent.objects.exists()


def test_a_stranger_cannot_add_a_turn_to_a_thread(alice, bob_token, daphne_port, redis_queue):
    first = conversation(user("u1", "hi"))
    assert alice.post(AG_UI, first, format="json", HTTP_ACCEPT="application/json").status_code == (
        202
    )

    stream = post_sse(
        daphne_port,
        AG_UI,
        conversation(user("u1", "hi"), user("u2", "mine now"), threadId=first["threadId"]),
        token=bob_token,
    )

    assert stream.status == 404
    assert Run.objects.count() == 1


def test_a_run_s_end_carries_its_usage_per_model_and_its_cost(
    alice_token, daphne_port, redis_queue
):
    price_entry("openai/gpt-test", (None, "0.000001", "0.000002", None))
    with FakeOpenAI() as model:
        model.usage = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
        process = start_model_worker(model)
        try:
            body = conversation(user("u1", "Hello"))
            stream = post_sse(daphne_port, AG_UI, body, token=alice_token, timeout=30)
        finally:
            stop_process(process)

    assert stream.status == 200, stream.body
    end = sent(stream)[-1][1]
    run = Run.objects.get(run_id=body["runId"])
    records = UsageRecord.objects.filter(run=run)
    assert records.count() == 3  # router, worker, memory
    assert end["usage"] == [
        {
            "provider": "openai",
            "model": "gpt-test",
            "inputTokens": sum(r.input_tokens or 0 for r in records),
            "outputTokens": sum(r.output_tokens or 0 for r in records),
            "totalTokens": sum(r.total_tokens or 0 for r in records),
            "reasoningTokens": 0,
            "cachedInputTokens": 0,
        }
    ]
    summary = run_usage_summary(run=run)
    assert summary.cost is not None
    assert end["metadata"]["cost"] == format_cost(summary.cost)  # a decimal string
    assert end["metadata"]["currency"] == "USD"
    assert end["metadata"]["costSource"] == summary.cost_source
    assert sent(stream) == client_stream(body["runId"])  # as a replay translates it
