"""The lean OpenAI-compatible model (agent_runs/runtime/openai_compatible.py) against a
loopback provider: what it sends, the deltas it yields (the same as AgentScope's own model of
the provider), its errors and retries, and a cancel that stops the call."""

import asyncio
import time
from typing import Any

import pytest
from agentscope.credential import DeepSeekCredential
from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import DeepSeekChatModel

from agent_runs.runtime import provider_errors
from agent_runs.runtime.agents import conversation
from agent_runs.runtime.chat_models import UsageLog, chat_model_for
from agent_runs.runtime.openai_compatible import provider_client, provider_clients_close
from agent_runs.runtime.output import RouteDecision
from tests.fake_llm import FakeOpenAI

TOOL = {
    "type": "function",
    "function": {
        "name": "calendar_list",
        "description": "List events.",
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
    },
}


@pytest.fixture
def fake(settings):
    with FakeOpenAI() as fake:
        fake.output = None  # plain text answers unless a test says otherwise
        fake.usage = {
            "prompt_tokens": 40,
            "completion_tokens": 5,
            "total_tokens": 45,
            "prompt_cache_hit_tokens": 32,
            "prompt_cache_miss_tokens": 8,
        }
        settings.DEEPSEEK_API_KEY = "sk-deep"
        settings.DEEPSEEK_BASE_URL = fake.base_url
        settings.DASHSCOPE_API_KEY = "sk-dash"
        settings.DASHSCOPE_BASE_URL = fake.base_url
        settings.AGENT_MODEL_MAX_RETRIES = 1
        settings.AGENT_MODEL_RETRY_DELAY_SECONDS = 0
        yield fake


async def read(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


def shape(chunk: Any) -> list[tuple[str, str, str]]:
    """A chunk's blocks without their random ids: (kind, name, text)."""
    shaped = []
    for block in chunk.content:
        if isinstance(block, TextBlock):
            shaped.append(("text", "", block.text))
        elif isinstance(block, ThinkingBlock):
            shaped.append(("thinking", "", block.thinking))
        elif isinstance(block, ToolCallBlock):
            shaped.append(("tool_call", f"{block.id}:{block.name}", block.input))
    return shaped


def test_it_streams_the_same_deltas_as_agentscopes_own_model_of_the_provider(fake):
    fake.reasoning = ["Let me", " think."]
    # The first turn of each model calls a tool, the second answers in text.
    fake.tool_call_turns = [[("call_1", "calendar_list", '{"day": "2026-11-26"}')]]

    async def both() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        theirs = DeepSeekChatModel(
            credential=DeepSeekCredential(api_key="sk", base_url=fake.base_url),
            model="deepseek-chat",
            max_retries=0,
        )
        ours = chat_model_for("deepseek/deepseek-chat")
        chunks = []
        for model, turn in ((theirs, 0), (ours, 0), (theirs, 1), (ours, 1)):
            fake.worker_turns = turn
            chunks.append(await read(await model(conversation((), "Hi"), tools=[TOOL])))
        return tuple(chunks)  # type: ignore[return-value]

    theirs_tool, ours_tool, theirs_text, ours_text = run(both())

    for theirs, ours in ((theirs_tool, ours_tool), (theirs_text, ours_text)):
        assert [shape(chunk) for chunk in ours] == [shape(chunk) for chunk in theirs]
        assert [chunk.is_last for chunk in ours] == [chunk.is_last for chunk in theirs]
        last_theirs, last_ours = theirs[-1], ours[-1]
        assert (last_ours.usage.input_tokens, last_ours.usage.output_tokens) == (40, 5)
        assert last_ours.usage.cache_input_tokens == last_theirs.usage.cache_input_tokens == 32
    assert shape(ours_tool[-1]) == [("tool_call", "call_1:calendar_list", '{"day": "2026-11-26"}')]
    assert shape(ours_text[-1]) == [
        ("thinking", "", "Let me think."),
        ("text", "", "Hello from the fake model."),
    ]
    # Each delta's text block carries the call's one block id.
    assert len({chunk.content[-1].id for chunk in ours_text[2:-1]}) == 1


def test_it_sends_the_providers_request_and_records_the_raw_usage_once(fake):
    log = UsageLog(stage="router")

    async def call() -> Any:
        model = chat_model_for("deepseek/deepseek-chat", usage_log=log)
        return await model.generate_structured_output(
            conversation((), "Hello"), structured_model=RouteDecision
        )

    response = run(call())

    assert response.content == fake.route
    request = fake.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-deep"
    body = request["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["thinking"] == {"type": "disabled"}  # DeepSeek's switch, as AgentScope sends
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "generate_structured_output"},
    }
    assert [tool["function"]["name"] for tool in body["tools"]] == ["generate_structured_output"]
    [call_record] = log.calls
    assert call_record.model_id == "deepseek/deepseek-chat"
    assert call_record.usage["input_tokens"] == 40 and call_record.usage["cache_input_tokens"] == 32
    assert call_record.metadata == fake.usage


def test_dashscope_gets_its_own_thinking_switch(fake):
    run(read_call(chat_model_for("dashscope/qwen-plus")))
    assert fake.requests[0]["body"]["enable_thinking"] is False
    assert "thinking" not in fake.requests[0]["body"]


def test_a_model_made_to_think_turns_each_providers_switch_on(fake):
    run(read_call(chat_model_for("deepseek/deepseek-chat", thinking=True)))
    run(read_call(chat_model_for("dashscope/qwen-plus", thinking=True)))

    deepseek, dashscope = (request["body"] for request in fake.requests)
    assert deepseek["thinking"] == {"type": "enabled"}
    assert dashscope["enable_thinking"] is True and "thinking" not in dashscope


def test_structured_output_without_thinking_still_turns_it_off_on_a_thinking_model(fake):
    """AgentScope's ``no_think`` strategy asks for thinking off: the caller's switch wins."""

    async def call() -> Any:
        model = chat_model_for("deepseek/deepseek-chat", thinking=True)
        return await read_call(model, extra_body={"thinking": {"type": "disabled"}})

    run(call())

    assert fake.requests[0]["body"]["thinking"] == {"type": "disabled"}


def run(coroutine: Any) -> Any:
    """``asyncio.run``, the loop's provider clients closed at the end (as a worker does)."""

    async def closing() -> Any:
        try:
            return await coroutine
        finally:
            await provider_clients_close()

    return asyncio.run(closing())


async def read_call(model: Any, **kwargs: Any) -> list[Any]:
    return await read(await model(conversation((), "Hi"), **kwargs))


@pytest.mark.parametrize(
    ("status", "error", "requests"),
    [
        (500, provider_errors.InternalServerError, 2),  # the call and one retry
        (429, provider_errors.RateLimitError, 2),
        (400, provider_errors.BadRequestError, 1),  # not transient: no retry
        (401, provider_errors.AuthenticationError, 1),
    ],
)
def test_an_error_answer_raises_its_status_error_after_the_retries_of_transient_ones(
    fake, status, error, requests
):
    fake.status = status
    with pytest.raises(error) as raised:
        run(read_call(chat_model_for("deepseek/deepseek-chat")))
    assert raised.value.status_code == status
    assert raised.value.body == {"message": "upstream exploded"}
    assert len(fake.requests) == requests


def test_a_provider_it_cannot_reach_is_a_connection_error(settings):
    with FakeOpenAI() as gone:
        base_url = gone.base_url
    settings.DEEPSEEK_API_KEY = "sk"
    settings.DEEPSEEK_BASE_URL = base_url
    settings.AGENT_MODEL_MAX_RETRIES = 0
    with pytest.raises(provider_errors.ProviderConnectionError):
        run(read_call(chat_model_for("deepseek/deepseek-chat")))


def test_a_cancel_stops_the_stream_within_a_second_and_its_call_is_recorded(fake):
    fake.answer = ["word "] * 200
    fake.chunk_delay = 0.05  # a ten-second answer
    log = UsageLog(stage="worker")

    async def cancelled() -> tuple[int, float]:
        model = chat_model_for("deepseek/deepseek-chat", usage_log=log)
        received = 0

        async def consume() -> None:
            nonlocal received
            stream: Any = await model(conversation((), "Hi"))
            async for _ in stream:
                received += 1

        task = asyncio.create_task(consume())
        while received < 3:
            await asyncio.sleep(0.01)
        asked = time.monotonic()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return received, time.monotonic() - asked

    received, took = run(cancelled())

    assert took < 1.0
    assert received < 20
    assert len(log.calls) == 1  # recorded once, with what it had (no usage yet)


def test_a_consumer_that_stops_early_closes_the_call_and_records_it_once(fake):
    log = UsageLog(stage="worker")

    async def first_chunk() -> Any:
        model = chat_model_for("deepseek/deepseek-chat", usage_log=log)
        stream: Any = await model(conversation((), "Hi"))
        async for chunk in stream:
            await stream.aclose()
            return chunk

    chunk = run(first_chunk())
    assert shape(chunk) == [("text", "", "Hello")]
    assert len(log.calls) == 1


def test_calls_on_one_loop_share_one_client_per_provider_and_another_loop_its_own(fake):
    async def clients() -> tuple[Any, Any, Any]:
        for _ in range(3):
            await read_call(chat_model_for("deepseek/deepseek-chat"))
        return (
            provider_client(fake.base_url),
            provider_client(fake.base_url),
            provider_client("http://127.0.0.1:9/v1"),
        )

    first, again, other = run(clients())
    elsewhere, *_ = run(clients())

    assert first is again and other is not first
    assert elsewhere is not first
    assert first.closed and other.closed  # closed with their loop's work
    assert len(fake.requests) == 6
