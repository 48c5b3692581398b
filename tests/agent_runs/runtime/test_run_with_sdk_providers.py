"""Whole runs on Anthropic, Gemini, Ollama and a LiteLLM model (OpenRouter), each faked only
at the network boundary (tests/fake_providers.py, tests/fake_llm.py): the provider's real
client runs, a tool is called, and each call's usage is stored and priced by the spec's
rules (sse-events-and-usage.md 5.2-5.6) at the catalog's prices."""

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command

from agent_runs.models import Message, Run
from billing.models import UsageRecord
from billing.selectors import run_usage_summary
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, start_worker, stop_process, wait_for, work_burst
from tests.fake_llm import FakeOpenAI
from tests.fake_providers import FakeAnthropic, FakeGemini, FakeOllama

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ANSWER = "Hello from the fake model."
STAGES = ("AGENT_WORKER_MODEL", "AGENT_ROUTER_MODEL", "AGENT_MEMORY_MODEL")


@dataclass
class Case:
    """A provider: its model id, its fake, the environment that points the model at it."""

    model_id: str
    fake: Any
    env: dict[str, str]


@contextmanager
def provider(name: str) -> Iterator[Case]:
    if name == "anthropic":
        with FakeAnthropic() as fake:
            env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url}
            yield Case("anthropic/claude-haiku-4-5", fake, env)
    elif name == "gemini":
        with FakeGemini() as fake:
            env = {"GEMINI_API_KEY": "gm-test", "GEMINI_BASE_URL": fake.base_url}
            yield Case("gemini/gemini-2.5-flash", fake, env)
    elif name == "ollama":
        with FakeOllama() as fake:
            yield Case("ollama/llama3.1", fake, {"OLLAMA_BASE_URL": fake.base_url})
    else:
        with FakeOpenAI() as fake:
            # OpenRouter's usage, with the cost it charged for the call.
            fake.usage = {
                "prompt_tokens": 30,
                "completion_tokens": 7,
                "total_tokens": 37,
                "prompt_tokens_details": {"cached_tokens": 0},
                "cost": 0.00042,
            }
            env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": fake.base_url}
            yield Case("litellm/openrouter/openai/gpt-4o-mini", fake, env)


def configure(case: Case, settings: Any, monkeypatch: Any) -> None:
    """Every stage on the case's model (LiteLLM reads its variables from the environment)."""
    for stage in STAGES:
        setattr(settings, stage, case.model_id)
    settings.AGENT_MODEL_MAX_RETRIES = 0
    for name, value in case.env.items():
        if hasattr(settings, name):
            setattr(settings, name, value)
        monkeypatch.setenv(name, value)


def script_tool_call(fake: Any) -> None:
    if isinstance(fake, FakeOpenAI):
        fake.tool_call_turns = [[("call_1", "calendar_list", '{"days": 3}')]]
    else:
        fake.tool_call_turns = [[("call_1", "calendar_list", {"days": 3})]]


# What each provider's fake reports per call, normalised (spec 5.2-5.3), and what one worker
# call costs at LiteLLM's catalog prices (or the provider's own cost).
EXPECTED = {
    "anthropic": {
        # input_tokens 25 + cache read 100 + cache write 20; its cached part is the read.
        "tokens": (145, 15, 160, 100, 0),
        # 25 * 1e-6 + 100 * 1e-7 (cache read) + 20 * 1.25e-6 (cache write) + 15 * 5e-6
        "cost": Decimal("0.000135"),
        "source": "catalog_fallback",
    },
    "gemini": {
        # promptTokenCount 120, of which cachedContentTokenCount 100; candidates 10 + thoughts 6
        "tokens": (120, 16, 136, 100, 6),
        # 20 * 3e-7 + 100 * 3e-8 + 16 * 2.5e-6
        "cost": Decimal("0.000049"),
        "source": "catalog_fallback",
    },
    "ollama": {
        "tokens": (42, 9, 51, 0, 0),
        "cost": Decimal("0"),  # a local model: LiteLLM's catalog prices it at zero
        "source": "catalog_fallback",
    },
    "openrouter": {
        "tokens": (30, 7, 37, 0, 0),
        "cost": Decimal("0.00042"),  # OpenRouter's usage.cost
        "source": "provider",
    },
}


@pytest.mark.parametrize("name", ["anthropic", "gemini", "ollama", "openrouter"])
def test_a_run_on_the_provider_calls_a_tool_and_stores_its_usage_priced(
    name, alice, alice_token, redis_queue, daphne_port, settings, monkeypatch
):
    settings.BILLING_CATALOG_PROVIDERS = ["anthropic", "gemini", "ollama"]
    with provider(name) as case:
        if name != "openrouter":  # prices from the catalog command: LiteLLM's price list
            call_command("update_pricing_catalog", models=case.model_id)
        configure(case, settings, monkeypatch)
        script_tool_call(case.fake)
        body = run_input()
        post_run(alice, body)
        work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    assert Message.objects.get(run=run, role="assistant").content == ANSWER
    tool = Message.objects.get(run=run, role="tool")
    assert tool.metadata["tool_name"] == "calendar_list"
    # The tool's result went back to the model in the provider's own format.
    assert "calendar_list" in json.dumps(case.fake.requests[2]["body"])
    assert_reached_the_provider(name, case)

    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    start = next(f["data"] for f in stream.events if f["event"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "calendar_list"
    result = next(f["data"] for f in stream.events if f["event"] == "TOOL_CALL_RESULT")
    assert result["status"] == "success" and result["error"] is None
    deltas = [f["data"]["delta"] for f in stream.events if f["event"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(deltas) == ANSWER
    assert stream.types[-1] == "RUN_FINISHED"

    expected = EXPECTED[name]
    worker_calls = UsageRecord.objects.filter(run=run, stage="worker").order_by("id")
    assert len(worker_calls) == 2  # the tool call, then the answer
    for record in worker_calls:
        assert record.model_id == case.model_id
        tokens = (
            record.input_tokens,
            record.output_tokens,
            record.total_tokens,
            record.cached_prompt_tokens,
            record.reasoning_tokens,
        )
        assert tokens == expected["tokens"]
        assert record.usage_complete
        assert record.cost == expected["cost"]
        assert record.cost_source == expected["source"]
        assert record.latency_ms is not None
    summary = run_usage_summary(run=run)
    assert summary.cost_source == expected["source"]  # every call of the run alike
    assert summary.model_call_records == UsageRecord.objects.filter(run=run).count() >= 3


def assert_reached_the_provider(name: str, case: Case) -> None:
    request = case.fake.requests[0]
    headers = {key.lower(): value for key, value in request["headers"].items()}
    if name == "anthropic":
        assert request["path"] == "/v1/messages"
        # The key, as the SDK sends it (this SDK: a bearer token; older ones: x-api-key).
        assert "sk-ant-test" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
        assert request["body"]["model"] == "claude-haiku-4-5" and request["body"]["stream"]
    elif name == "gemini":
        assert request["path"].endswith("/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        assert headers["x-goog-api-key"] == "gm-test"
    elif name == "ollama":
        assert request["path"] == "/api/chat"
        assert request["body"]["model"] == "llama3.1" and request["body"]["stream"]
    else:
        assert request["path"] == "/v1/chat/completions"
        assert headers["authorization"] == "Bearer sk-or-test"
        assert request["body"]["model"] == "openai/gpt-4o-mini"
        assert request["body"]["usage"] == {"include": True}  # OpenRouter's cost, asked for


@pytest.mark.parametrize("name", ["anthropic", "gemini", "ollama", "openrouter"])
def test_cancelling_a_run_stops_the_providers_stream_within_a_second(
    name, alice, redis_queue, daphne_port
):
    with provider(name) as case:
        case.fake.answer = [f"word{i} " for i in range(200)]
        case.fake.output = None  # a plain answer, streamed a word at a time
        case.fake.chunk_delay = 0.2  # forty seconds of it
        worker = start_worker(
            AGENT_WORKER_MODEL=case.model_id,
            AGENT_ROUTER_MODEL="demo",
            AGENT_MEMORY_MODEL="demo",
            AGENT_MODEL_MAX_RETRIES="0",
            **case.env,
        )
        try:
            body = run_input()
            post_run(alice, body)
            # Mid-stream: the worker's answer has begun to arrive.
            wait_for(
                lambda: case.fake.requests and case.fake.requests[0].get("written", 0) >= 3,
                seconds=60,
            )
            started = time.monotonic()
            response = alice.post(f"/api/v1/agent/runs/{body['runId']}/cancel")
            took = time.monotonic() - started
            # The provider's connection is closed: its answer is abandoned midway.
            wait_for(lambda: case.fake.abandoned, seconds=10)
        finally:
            stop_process(worker)

    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert took < 1.0
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.CANCELLED
    assert not Message.objects.filter(run=run, role="assistant").exists()
    assert case.fake.requests[0]["written"] < 100  # it did not stream to its end


def sent_images(name: str, body: dict[str, Any]) -> list[str]:
    """The base64 images of a request's user turns, in the provider's own format."""
    if name == "gemini":
        parts = [p for c in body["contents"] if c["role"] == "user" for p in c["parts"]]
        return [p["inlineData"]["data"] for p in parts if "inlineData" in p]
    users = [m for m in body["messages"] if m["role"] == "user"]
    if name == "ollama":
        return [image for m in users for image in m.get("images", [])]
    parts = [p for m in users if isinstance(m["content"], list) for p in m["content"]]
    if name == "anthropic":
        return [p["source"]["data"] for p in parts if p.get("type") == "image"]
    prefix = "data:image/png;base64,"
    urls = [p["image_url"]["url"] for p in parts if "image_url" in p]
    return [url.removeprefix(prefix) for url in urls if url.startswith(prefix)]


@pytest.mark.parametrize("name", ["anthropic", "gemini", "ollama", "openrouter"])
def test_an_image_reaches_the_provider_in_its_own_format(
    name, alice, alice_image_url, redis_queue, settings, monkeypatch
):
    from tests.attachments.images import png_bytes

    url = alice_image_url()
    blocks = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "binary", "mimeType": "image/png", "url": url},
    ]
    with provider(name) as case:
        configure(case, settings, monkeypatch)
        settings.AGENT_ROUTER_MODEL = settings.AGENT_MEMORY_MODEL = "demo"
        body = run_input(messages=[{"id": "m1", "role": "user", "content": blocks}])
        post_run(alice, body)
        work_burst(redis_queue)

    assert Run.objects.get(run_id=body["runId"]).status == Run.Status.COMPLETED
    assert sent_images(name, case.fake.requests[0]["body"]) == [
        base64.b64encode(png_bytes()).decode()
    ]


def test_a_litellm_model_without_a_provider_cost_is_priced_by_the_catalog_not_by_litellm(
    alice, redis_queue, settings, monkeypatch
):
    # LiteLLM puts its own estimate in usage.cost; only a cost the provider sent is one.
    settings.BILLING_CATALOG_PROVIDERS = ["litellm"]
    call_command("update_pricing_catalog", models="litellm/openai/gpt-4o-mini")
    with FakeOpenAI() as fake:  # an OpenAI-compatible server: usage without a cost
        model_id = "litellm/openai/gpt-4o-mini"
        for stage in STAGES:
            setattr(settings, stage, model_id)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_API_BASE", fake.base_url)
        body = run_input()
        post_run(alice, body)
        work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    record = UsageRecord.objects.filter(run=run, stage="worker").first()
    assert record is not None and record.model_id == model_id
    assert (record.input_tokens, record.output_tokens) == (11, 5)  # the fake's usage
    assert record.direct_cost is None and "cost" not in record.metadata
    assert record.metadata["litellm_cost"] > 0  # LiteLLM's estimate, kept apart
    # LiteLLM's price list, through the catalog: 11 * 1.5e-7 + 5 * 6e-7
    assert record.cost == Decimal("0.00000465")
    assert record.cost_source == "catalog_fallback"


@pytest.mark.parametrize("name", ["anthropic", "gemini", "ollama", "openrouter"])
@pytest.mark.parametrize(("status", "calls"), [(500, 2), (400, 1)])
def test_a_provider_error_fails_the_run_as_a_model_error_retried_only_when_transient(
    name, status, calls, alice, alice_token, redis_queue, daphne_port, settings, monkeypatch
):
    with provider(name) as case:
        configure(case, settings, monkeypatch)
        settings.AGENT_ROUTER_MODEL = settings.AGENT_MEMORY_MODEL = "demo"
        settings.AGENT_MODEL_MAX_RETRIES = 1
        settings.AGENT_MODEL_RETRY_DELAY_SECONDS = 0
        case.fake.status = status
        body = run_input()
        post_run(alice, body)
        work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED
    assert len(case.fake.requests) == calls  # a 5xx once more, a 4xx never
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert stream.types[-1] == "RUN_ERROR"
    assert stream.events[-1]["data"]["code"] == "model_error"
    assert "upstream exploded" not in str(stream.events)  # the cause stays private
    assert "upstream exploded" in run.error  # and is kept for staff
