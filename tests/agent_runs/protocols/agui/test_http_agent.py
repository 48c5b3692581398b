"""The official AG-UI client's ``HttpAgent`` (``@ag-ui/client``, pinned in
tests/clients/agui/package.json), unmodified, holding conversations with the server at
``POST /api/v1/agent/ag-ui``: over real HTTP against daphne, with the runs done by a real
worker process (tests/clients/agui/run_agent.mjs)."""

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_runs.models import Message, Run, RunEvent
from tests.agent_runs.protocols.agui.test_agui_client import CLIENT_DIR, NODE
from tests.conftest import start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed: no AG-UI client to run"),
]

SCRIPT = CLIENT_DIR / "run_agent.mjs"


def converse(
    port: int,
    token: str,
    thread_id: str,
    turns: list[dict[str, Any]],
    meanwhile: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The client's turns, each as it reported it, and the messages it holds at the end;
    ``meanwhile`` runs while the client talks."""
    reports, messages, _stderr = converse_told(port, token, thread_id, turns, meanwhile)
    return reports, messages


def converse_told(
    port: int,
    token: str,
    thread_id: str,
    turns: list[dict[str, Any]],
    meanwhile: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """``converse``, and what the client wrote on stderr (its warnings)."""
    url = f"http://127.0.0.1:{port}/api/v1/agent/ag-ui"
    plan = json.dumps({"threadId": thread_id, "turns": turns})
    client = subprocess.Popen(
        [str(NODE), str(SCRIPT), url, token, plan],
        cwd=CLIENT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        if meanwhile is not None:
            meanwhile()
        stdout, stderr = client.communicate(timeout=90)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    assert client.returncode == 0, stderr
    *reports, final = [json.loads(line) for line in stdout.splitlines()]
    # Every field of every event is one the client's schemas know: it strips any other
    # with an "[ag-ui][enforce]" warning, and drops unknown events the same way.
    assert "[ag-ui][enforce]" not in stderr, stderr
    return reports, final["messages"], stderr


def turn(text: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"u-{uuid.uuid4().hex[:8]}", "text": text, "runId": f"r-{uuid.uuid4()}", **extra}


@pytest.fixture
def worker(redis_queue: Any) -> Iterator[None]:
    process = start_worker()
    yield
    stop_process(process)


def test_a_three_turn_conversation_with_a_tool_call(alice_token, daphne_port, worker):
    thread_id = str(uuid.uuid4())
    turns = [turn("/tool calendar_list"), turn("Thanks. Anything else?"), turn("Bye")]

    reports, messages = converse(daphne_port, alice_token, thread_id, turns)

    assert [report["ok"] for report in reports] == [True, True, True], reports
    for report, sent in zip(reports, turns, strict=True):
        run = Run.objects.get(run_id=sent["runId"], thread_id=thread_id)
        assert run.status == Run.Status.COMPLETED
        stored = list(
            RunEvent.objects.filter(run=run).order_by("pk").values_list("type", flat=True)
        )
        assert [event["type"] for event in report["events"]] == stored  # every event, in order
        # AG-UI 1.0: the version the stream speaks, and how the run ended.
        assert report["events"][0]["protocolVersion"] == "1.0"
        assert report["events"][-1]["outcome"] == {"type": "success"}
    # The backend tool call, as the client keeps it: an assistant message with the call and
    # a tool message with its result, and the spec's result fields in the event's metadata.
    first = reports[0]
    calls = [m for m in first["newMessages"] if m["role"] == "assistant" and m.get("toolCalls")]
    assert calls and calls[0]["toolCalls"][0]["function"]["name"] == "calendar_list"
    results = [event for event in first["events"] if event["type"] == "TOOL_CALL_RESULT"]
    assert results and results[0]["metadata"]["status"] == "success"
    # Each answer reached the client whole, with the spec's TEXT_MESSAGE_END fields.
    for report, sent in zip(reports, turns, strict=True):
        ends = [e["metadata"] for e in report["events"] if e["type"] == "TEXT_MESSAGE_END"]
        answer = Message.objects.get(run__run_id=sent["runId"], role="assistant")
        assert ends[-1]["answer"] == answer.content
        assert ends[-1]["stage"] == "worker" and "ui_schema" in ends[-1]
        assert any(m["content"] == answer.content for m in report["newMessages"])
    # The server kept each user message once, though the client sent it again every turn.
    stored_users = Message.objects.filter(thread_id=thread_id, role="user").order_by("seq")
    assert list(stored_users.values_list("message_id", flat=True)) == [t["id"] for t in turns]
    assert [m["id"] for m in messages if m["role"] == "user"] == [t["id"] for t in turns]


def test_abort_run_cancels_the_run_on_the_server(alice_token, daphne_port, redis_queue):
    thread_id = str(uuid.uuid4())
    # Stopped in its first stage, the router's model call on its way.
    stopped = turn("Plan my week", abortOn={"type": "STEP_STARTED", "stepName": "router"})
    # The conversation goes on after a stop, the stopped turn's message in it.
    after = turn("Hi", waitMs=3000)
    with FakeOpenAI() as model:
        model.delay = 30  # every stage's model call would outlast the test

        def answer_at_once_after_the_cancel() -> None:
            wait_for(lambda: Run.objects.filter(run_id=stopped["runId"], status="cancelled"))
            model.delay = 0

        process = start_worker(
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            reports, messages = converse(
                daphne_port,
                alice_token,
                thread_id,
                [stopped, after],
                meanwhile=answer_at_once_after_the_cancel,
            )
        finally:
            stop_process(process)

    assert process.returncode == 0  # a clean shut-down, after a stopped job too
    report, next_turn = reports
    assert report["ok"] and report["abortedAt"], report
    run = Run.objects.get(run_id=stopped["runId"])
    assert run.status == Run.Status.CANCELLED
    aborted = datetime.fromtimestamp(report["abortedAt"] / 1000, tz=UTC)
    assert run.finished_at is not None
    assert (run.finished_at - aborted).total_seconds() < 1.0  # cancelled within a second
    last = RunEvent.objects.filter(run=run).order_by("pk").last()
    assert last is not None and last.payload["code"] == "cancelled"
    assert not Message.objects.filter(run=run, role="assistant").exists()
    assert next_turn["ok"], next_turn
    assert Run.objects.get(run_id=after["runId"]).status == Run.Status.COMPLETED
    assert [m["id"] for m in messages if m["role"] == "user"] == [stopped["id"], after["id"]]


def test_a_run_cancelled_mid_answer_ends_in_run_finished_with_outcome_cancelled(
    alice, alice_token, daphne_port, redis_queue
):
    thread_id = str(uuid.uuid4())
    cancelled = turn("Tell me a long story")
    with FakeOpenAI() as model:
        model.answer = ["Once ", "upon ", "a ", "time "] * 40
        model.chunk_delay = 0.25  # the answer streams for a while

        def cancel_mid_answer() -> None:
            wait_for(
                lambda: RunEvent.objects.filter(
                    run__run_id=cancelled["runId"], type="TEXT_MESSAGE_CONTENT"
                ).exists(),
                seconds=60,
            )
            answer = alice.post(f"/api/v1/agent/runs/{cancelled['runId']}/cancel")
            assert answer.status_code == 200, answer.content

        process = start_worker(
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            (report,), _messages = converse(
                daphne_port, alice_token, thread_id, [cancelled], meanwhile=cancel_mid_answer
            )
        finally:
            stop_process(process)

    # The client's own verifyEvents took the stream: the run ended, not failed.
    assert report["ok"], report
    events = report["events"]
    assert events[0]["type"] == "RUN_STARTED" and events[0]["protocolVersion"] == "1.0"
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-1]["metadata"]["code"] == "cancelled"
    assert "RUN_ERROR" not in [event["type"] for event in events]
    # What the cancel left open ends before the run: the answer, then its step.
    assert [event["type"] for event in events[-3:-1]] == ["TEXT_MESSAGE_END", "STEP_FINISHED"]
    stored = RunEvent.objects.filter(run__run_id=cancelled["runId"]).order_by("seq")
    assert list(stored.values_list("type", flat=True))[-1] == "RUN_ERROR"  # the journal's
