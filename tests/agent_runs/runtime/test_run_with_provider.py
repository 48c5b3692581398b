"""Runs on an OpenAI-compatible provider, faked only at the network boundary."""

import json

import pytest

from agent_runs.models import Message, Run, Visibility
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, work_burst
from tests.fake_llm import FakeOpenAI, said

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_a_run_streams_the_providers_answer(
    alice, alice_token, redis_queue, daphne_port, fake_openai
):
    body = run_input(messages=[{"id": "m1", "role": "user", "content": "Say hello"}])
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    request = fake_openai.requests[0]
    assert request["path"] == "/v1/chat/completions"
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test"
    assert request["body"]["model"] == "gpt-test"
    assert said(request["body"]["messages"])[-1]["content"][0]["text"] == "Say hello"
    answer = "Hello from the fake model."
    assert Message.objects.get(run=run, role="assistant").content == answer
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    deltas = [f["data"]["delta"] for f in stream.events if f["event"] == "TEXT_MESSAGE_CONTENT"]
    # The answer streams as the model writes its structured output.
    assert "".join(deltas) == answer and len(deltas) > 1
    assert stream.types[-1] == "RUN_FINISHED"


def test_a_model_error_ends_the_run_with_run_error_after_bounded_retries(
    alice, alice_token, redis_queue, daphne_port, fake_openai
):
    fake_openai.status = 500
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED
    assert "InternalServerError" in run.error  # the cause, for staff
    assert len(fake_openai.requests) == 2  # the call and one retry
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert stream.types[0] == "RUN_STARTED"
    assert stream.types[-1] == "RUN_ERROR"
    assert "RUN_FINISHED" not in stream.types
    assert stream.events[-1]["data"]["message"] == "runtime execution failed"
    assert stream.events[-1]["data"]["code"] == "model_error"
    assert "upstream exploded" not in str(stream.events)  # the cause stays private


def test_a_run_that_outlives_its_job_timeout_fails_with_run_error(
    alice, alice_token, redis_queue, daphne_port, fake_openai, settings
):
    fake_openai.delay = 5
    settings.AGENT_RUN_JOB_TIMEOUT = 1
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED
    assert "JobTimeoutException" in run.error
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert stream.types[-1] == "RUN_ERROR"
    assert stream.events[-1]["data"]["code"] == "timeout"


@pytest.mark.parametrize(
    ("model_id", "key_setting", "url_setting", "usage"),
    [
        (
            "deepseek/deepseek-chat",
            "DEEPSEEK_API_KEY",
            "DEEPSEEK_BASE_URL",
            {
                "prompt_tokens": 40,
                "completion_tokens": 5,
                "total_tokens": 45,
                "prompt_tokens_details": {"cached_tokens": 32},
                "prompt_cache_hit_tokens": 32,
                "prompt_cache_miss_tokens": 8,
            },
        ),
        (
            "dashscope/qwen-plus",
            "DASHSCOPE_API_KEY",
            "DASHSCOPE_BASE_URL",
            {
                "prompt_tokens": 40,
                "completion_tokens": 5,
                "total_tokens": 45,
                "completion_tokens_details": {"reasoning_tokens": 3},
            },
        ),
    ],
)
def test_deepseek_and_dashscope_shaped_streams_give_the_answer_and_the_reasoning_apart(
    alice,
    alice_token,
    redis_queue,
    daphne_port,
    settings,
    model_id,
    key_setting,
    url_setting,
    usage,
):
    with FakeOpenAI() as fake:
        fake.reasoning = ["Let me think.", " The user greets me."]
        fake.usage = usage
        settings.AGENT_WORKER_MODEL = model_id
        setattr(settings, key_setting, "sk-provider")
        setattr(settings, url_setting, fake.base_url)
        body = run_input()
        post_run(alice, body)
        work_burst(redis_queue)
        # The thread's next turn: its model is given the answer, never the reasoning (which
        # DeepSeek refuses to be sent back).
        post_run(alice, run_input(threadId=body["threadId"]))
        work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    assert fake.requests[0]["body"]["model"] == model_id.split("/", 1)[1]
    answer = Message.objects.get(run=run, role="assistant", visibility_mask=int(Visibility.ALL))
    assert answer.content == "Hello from the fake model."
    stream = read_sse(
        daphne_port, body["threadId"], token=alice_token, query={"runId": body["runId"]}
    )
    assert stream.types[-1] == "RUN_FINISHED"
    # The reasoning streams a delta at a time, as a reasoning message apart from the answer.
    reasoning_id = f"reasoning-worker-{body['runId']}-1"
    spans = [
        (frame["event"], frame["data"]["messageId"])
        for frame in stream.events
        if frame["event"].startswith("REASONING")
    ]
    assert spans == [
        ("REASONING_START", reasoning_id),
        ("REASONING_MESSAGE_START", reasoning_id),
        ("REASONING_MESSAGE_CONTENT", reasoning_id),
        ("REASONING_MESSAGE_CONTENT", reasoning_id),
        ("REASONING_MESSAGE_END", reasoning_id),
        ("REASONING_END", reasoning_id),
    ]
    deltas = [
        f["data"]["delta"] for f in stream.events if f["event"] == "REASONING_MESSAGE_CONTENT"
    ]
    assert deltas == fake.reasoning
    # ... and it is no part of the answer.
    answer_events = [f for f in stream.events if f["event"].startswith("TEXT_MESSAGE")]
    assert "think" not in str(answer_events)
    # Kept as a message of the thread, for the history that asks for it and for no model.
    kept = Message.objects.get(run=run, visibility_mask=int(Visibility.REASONING))
    assert (kept.message_id, kept.content) == (reasoning_id, "Let me think. The user greets me.")
    assert kept.metadata["stage"] == "worker" and kept.seq < answer.seq
    next_turn = json.dumps(said(fake.requests[-1]["body"]["messages"]))
    assert "Hello from the fake model." in next_turn and "Let me think" not in next_turn


def test_a_memory_stage_that_breaks_off_mid_reasoning_ends_its_reasoning_and_the_run_completes(
    alice, alice_token, redis_queue, daphne_port, fake_openai, settings
):
    fake_openai.reasoning = ["Anything to remember?"]
    fake_openai.broken_after_reasoning = True  # the memory stage's plain answer breaks off
    settings.AGENT_MEMORY_MODEL = "openai/gpt-test"
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    memory_id = f"reasoning-memory-{body['runId']}-1"
    memory = [
        frame["event"] for frame in stream.events if frame["data"].get("messageId") == memory_id
    ]
    assert memory == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert stream.types[-2:] == ["STEP_FINISHED", "RUN_FINISHED"]


def test_an_unknown_model_id_fails_the_run_with_a_configuration_error(
    alice, alice_token, redis_queue, daphne_port, settings
):
    settings.AGENT_WORKER_MODEL = "acme/model-1"
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED and "unknown model id 'acme/model-1'" in run.error
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert stream.events[-1]["data"]["code"] == "configuration_error"


def test_a_second_run_sees_the_threads_earlier_turns_but_not_hidden_ones(
    alice, redis_queue, fake_openai
):
    first = run_input(messages=[{"id": "m1", "role": "user", "content": "My name is Ada."}])
    post_run(alice, first)
    work_burst(redis_queue)
    hidden = run_input(
        threadId=first["threadId"],
        messages=[{"id": "m2", "role": "user", "content": "A secret aside."}],
    )
    post_run(alice, hidden)
    work_burst(redis_queue)
    # Visible in the history UI only: no stage may read it.
    Message.objects.filter(run__run_id=hidden["runId"]).update(
        visibility_mask=int(Visibility.UI_HISTORY)
    )
    second = run_input(
        threadId=first["threadId"],
        messages=[{"id": "m3", "role": "user", "content": "What is my name?"}],
    )
    post_run(alice, second)
    work_burst(redis_queue)

    prompt = said(fake_openai.requests[-1]["body"]["messages"])
    texts = [(m["role"], m["content"][0]["text"]) for m in prompt if m["role"] != "system"]
    assert texts == [
        ("user", "My name is Ada."),
        ("assistant", "Hello from the fake model."),
        ("user", "What is my name?"),
    ]
