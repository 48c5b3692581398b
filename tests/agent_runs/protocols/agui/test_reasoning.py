"""A reasoning model's thinking over AG-UI (docs/protocols/agui.md, "Reasoning"): a loopback
DeepSeek-shaped provider streams ``delta.reasoning_content`` before its answer and reports
``usage.completion_tokens_details.reasoning_tokens``; the run, done by a real worker process,
is read by the unmodified ``@ag-ui/client`` (its schemas and ``verifyEvents``) over real HTTP
against daphne, live and replayed, on the conversation endpoint and on the seed's."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runs.models import Message, Run, RunEvent, Visibility
from billing.models import UsageRecord
from tests.agent_runs.protocols.agui.test_agui_client import NODE, assert_accepted, journal_types
from tests.agent_runs.protocols.agui.test_agui_client import read_with_client as client_reads
from tests.agent_runs.protocols.agui.test_http_agent import converse_told, turn
from tests.agent_runs.protocols.agui.test_single_request import (
    AG_UI,
    RUNS,
    client_stream,
    conversation,
    sent,
    user,
)
from tests.agent_runs.sse import post_sse, read_sse
from tests.conftest import run_input, start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed: no AG-UI client to run"),
]

THOUGHTS = ["The user greets me.", " A greeting back", " will do."]
# DeepSeek's usage of a call that reasoned: the reasoning tokens are part of the completion's.
USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 12,
    "total_tokens": 52,
    "completion_tokens_details": {"reasoning_tokens": 7},
    "prompt_cache_hit_tokens": 0,
    "prompt_cache_miss_tokens": 40,
}
REASONING_TYPES = [
    "REASONING_START",
    "REASONING_MESSAGE_START",
    *["REASONING_MESSAGE_CONTENT"] * len(THOUGHTS),
    "REASONING_MESSAGE_END",
    "REASONING_END",
]


@pytest.fixture
def reasoner(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """A real worker whose every stage's model is ``deepseek/deepseek-reasoner`` on the
    loopback provider, which reasons before each answer (not before the router's decision)."""
    with FakeOpenAI() as model:
        model.reasoning = list(THOUGHTS)
        model.usage = USAGE
        process = start_worker(
            AGENT_ROUTER_MODEL="deepseek/deepseek-reasoner",
            AGENT_WORKER_MODEL="deepseek/deepseek-reasoner",
            AGENT_MEMORY_MODEL="deepseek/deepseek-reasoner",
            DEEPSEEK_BASE_URL=model.base_url,
            DEEPSEEK_API_KEY="sk-test",
        )
        try:
            yield model
        finally:
            model.delay = model.chunk_delay = 0
            stop_process(process)


def reasoning_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if event["type"].startswith("REASONING")]


def test_an_http_agent_gets_the_reasoning_as_reasoning_events_and_its_tokens_in_the_usage(
    alice_token, daphne_port, reasoner
):
    thread_id = str(uuid.uuid4())
    turns = [turn("Hello"), turn("And again")]

    reports, messages, stderr = converse_told(daphne_port, alice_token, thread_id, turns)

    # Both turns went through the client's own pipeline (schemas, verifyEvents) without a
    # word: the second sent the first's reasoning message back in its conversation.
    assert [report["ok"] for report in reports] == [True, True], reports
    assert stderr == "", stderr
    first, _second = reports
    run = Run.objects.get(run_id=turns[0]["runId"], thread_id=thread_id)
    stored = journal_types(run=run)
    assert [event["type"] for event in first["events"]] == stored  # every event, in order
    # The worker's reasoning and then the memory stage's, each a span with one message.
    worker_id = f"reasoning-worker-{run.run_id}-1"
    memory_id = f"reasoning-memory-{run.run_id}-1"
    spans = reasoning_events(first["events"])
    assert [event["type"] for event in spans] == REASONING_TYPES * 2
    starts = [event for event in spans if event["type"] == "REASONING_START"]
    assert [(e["messageId"], e["metadata"]["stage"]) for e in starts] == [
        (worker_id, "worker"),
        (memory_id, "memory"),
    ]
    assert stored.index("REASONING_END") < stored.index("TEXT_MESSAGE_START")
    # The client keeps each as a reasoning message, apart from the answer.
    held = {
        m["id"]: {key: m[key] for key in ("id", "role", "content")}
        for m in first["newMessages"]
        if m["role"] == "reasoning"
    }
    assert held == {
        worker_id: {"id": worker_id, "role": "reasoning", "content": "".join(THOUGHTS)},
        memory_id: {"id": memory_id, "role": "reasoning", "content": "".join(THOUGHTS)},
    }
    answer = Message.objects.get(run=run, role="assistant", visibility_mask=int(Visibility.ALL))
    assert "greets" not in answer.content
    assert {m["id"] for m in messages if m["role"] == "reasoning"} >= set(held)
    # Its tokens: in each call's usage record, and in the run's end, per model.
    records = UsageRecord.objects.filter(run=run)
    assert [r.reasoning_tokens for r in records.order_by("pk")] == [7, 7, 7]  # three stages
    [usage] = first["events"][-1]["usage"]
    assert usage == {
        "provider": "deepseek",
        "model": "deepseek-reasoner",
        "inputTokens": sum(r.input_tokens or 0 for r in records),
        "outputTokens": sum(r.output_tokens or 0 for r in records),
        "totalTokens": sum(r.total_tokens or 0 for r in records),
        "reasoningTokens": sum(r.reasoning_tokens for r in records),
        "cachedInputTokens": 0,
    }
    assert usage["reasoningTokens"] == 21


def test_a_replay_of_a_reasoning_run_is_what_was_sent_live_on_either_endpoint(
    alice_token, daphne_port, reasoner, tmp_path
):
    live = conversation(user("u1", "Hello"))
    ag_ui = post_sse(daphne_port, AG_UI, live, token=alice_token, timeout=30)
    seed = run_input()
    seed_live = post_sse(daphne_port, RUNS, seed, token=alice_token, timeout=30)

    assert ag_ui.status == seed_live.status == 200
    assert [event["type"] for _id, event in sent(ag_ui)] == journal_types(run__run_id=live["runId"])
    assert sent(ag_ui) == client_stream(live["runId"])  # as a replay translates it
    # The seed's endpoints send the journal's events as they stand, reasoning included: the
    # live answer to the POST is the replay of GET …/events, frame for frame.
    replay = read_sse(
        daphne_port, seed["threadId"], token=alice_token, query={"runId": seed["runId"]}
    )
    assert sent(seed_live) == sent(replay)
    journal = RunEvent.objects.filter(run__run_id=seed["runId"]).order_by("pk")
    assert [event for _id, event in sent(replay)] == [row.payload for row in journal]
    deltas = [e["delta"] for _id, e in sent(replay) if e["type"] == "REASONING_MESSAGE_CONTENT"]
    assert deltas == THOUGHTS * 2
    # ... and the official client takes the seed's stream as it stands.
    verdict = client_reads(
        daphne_port, seed["threadId"], alice_token, tmp_path, runId=seed["runId"]
    )
    assert_accepted(verdict)
    assert [kind for kind in verdict.types if kind.startswith("REASONING")] == REASONING_TYPES * 2


def test_a_run_cancelled_mid_reasoning_ends_in_run_finished_with_outcome_cancelled(
    alice, alice_token, daphne_port, reasoner
):
    reasoner.reasoning = ["Hmm, "] * 200
    reasoner.chunk_delay = 0.1  # the model thinks for a while
    thread_id = str(uuid.uuid4())
    cancelled = turn("Think hard")

    def cancel_mid_reasoning() -> None:
        wait_for(
            lambda: RunEvent.objects.filter(
                run__run_id=cancelled["runId"], type="REASONING_MESSAGE_CONTENT"
            ).exists(),
            seconds=60,
        )
        answer = alice.post(f"/api/v1/agent/runs/{cancelled['runId']}/cancel")
        assert answer.status_code == 200, answer.content

    (report,), _messages, stderr = converse_told(
        daphne_port, alice_token, thread_id, [cancelled], meanwhile=cancel_mid_reasoning
    )

    assert report["ok"], report  # verifyEvents took it: nothing left open
    assert stderr == "", stderr
    ends = [event["type"] for event in report["events"][-4:]]
    assert ends == ["REASONING_MESSAGE_END", "REASONING_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert report["events"][-1]["outcome"] == {"type": "cancelled"}
    # A cancelled run keeps nothing: no answer, no reasoning.
    assert not Message.objects.filter(run__run_id=cancelled["runId"], role="assistant").exists()
