"""The stages of a run through a real worker: the router's route and tool choice, the
worker's structured output, and the memory stage (against the loopback provider, or the
offline demo model where a stage's model is not the provider's)."""

import json

import pytest

from agent_runs.models import AutomationJob, Message, Run, RunEvent, UserMemory, Visibility
from agent_runs.runtime.agents import conversation
from agent_runs.runtime.async_bridge import run_coroutine
from agent_runs.runtime.chat_models import UsageLog, chat_model_for
from agent_runs.runtime.output import RouteDecision
from tests.conftest import post_run, run_input, work_burst
from tests.fake_llm import FakeOpenAI, backend_tool_names, said

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ALL_CALENDAR_TOOLS = ["calendar_create", "calendar_delete", "calendar_list", "calendar_update"]


def user_input(text, **overrides):
    return run_input(messages=[{"id": "m1", "role": "user", "content": text}], **overrides)


def payloads(run_id, kind=None):
    events = RunEvent.objects.filter(run__run_id=run_id).order_by("pk")
    return [e.payload for e in events if kind is None or e.payload["type"] == kind]


def offers_structured_route(request):
    tools = request["body"].get("tools", [])
    return [tool["function"]["name"] for tool in tools] == ["generate_structured_output"]


def test_the_router_gives_the_worker_only_the_tools_it_chose(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_ROUTER_MODEL = "openai/gpt-test"
    fake_openai.route = {"route": "use_tools", "tools": ["calendar_list", "launch_rockets"]}
    body = user_input("What do I have this week?")
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get().status == Run.Status.COMPLETED
    router, worker = fake_openai.requests
    assert offers_structured_route(router)
    router_prompt = str(router["body"]["messages"][0]["content"])
    assert all(name in router_prompt for name in ALL_CALENDAR_TOOLS)
    assert said(router["body"]["messages"])[-1]["content"][0]["text"].startswith(
        "What do I have this week?"
    )
    # Only the chosen tool that is enabled: an unknown name is dropped.
    assert backend_tool_names(worker) == ["calendar_list"]
    steps = [p["stepName"] for p in payloads(body["runId"], "STEP_STARTED")]
    assert steps == ["router", "worker", "memory"]


def test_a_clarify_route_gives_the_worker_no_tools_and_asks_back(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_ROUTER_MODEL = "openai/gpt-test"
    fake_openai.route = {"route": "clarify", "tools": ["calendar_create"]}
    fake_openai.answer = ["Which day do you mean?"]
    fake_openai.output = {"result_type": "clarification", "status": "success"}
    body = user_input("Move my meeting")
    post_run(alice, body)
    work_burst(redis_queue)

    worker = fake_openai.requests[1]
    assert backend_tool_names(worker) == []
    assert "clarifying question" in str(worker["body"]["messages"][0]["content"])
    [end] = payloads(body["runId"], "TEXT_MESSAGE_END")
    assert end["result_type"] == "clarification"
    assert end["answer"] == "Which day do you mean?"
    stored = Message.objects.get(role="assistant")
    assert stored.metadata["route"] == "clarify"


def test_a_router_that_gives_no_usable_decision_leaves_every_enabled_tool(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_ROUTER_MODEL = "openai/gpt-test"
    fake_openai.route = {"route": "launch"}  # not a route
    body = user_input("Hello")
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get().status == Run.Status.COMPLETED
    worker = next(r for r in fake_openai.requests if not offers_structured_route(r))
    assert backend_tool_names(worker) == ALL_CALENDAR_TOOLS


def test_the_structured_output_reaches_the_text_message_end_and_the_stored_message(
    alice, redis_queue, fake_openai
):
    fake_openai.answer = ["You have ", "two events."]
    fake_openai.output = {
        "key_points": ["2 events", "next: standup at 09:00"],
        "result_type": "execution_report",
        "suggested_actions": [{"label": "Tomorrow", "prompt": "And tomorrow?"}],
        "status": "partial_success",
        "ui_hints": {"title": "This week", "blocks": [{"type": "divider"}]},
    }
    body = user_input("What do I have?")
    post_run(alice, body)
    work_burst(redis_queue)

    [end] = payloads(body["runId"], "TEXT_MESSAGE_END")
    assert end["answer"] == "You have two events."
    assert end["key_points"] == ["2 events", "next: standup at 09:00"]
    assert end["result_type"] == "execution_report"
    assert end["status"] == "partial_success"
    assert end["suggested_actions"] == [{"label": "Tomorrow", "prompt": "And tomorrow?"}]
    deltas = [p["delta"] for p in payloads(body["runId"], "TEXT_MESSAGE_CONTENT")]
    assert "".join(deltas) == "You have two events." and len(deltas) > 1
    output = Message.objects.get(role="assistant").metadata["agent_output"]
    assert output["ui_hints"] == {"title": "This week", "blocks": [{"type": "divider"}]}
    assert output["status"] == "partial_success"


def test_a_model_that_never_gives_the_structured_output_leaves_a_partial_answer(
    alice, redis_queue, fake_openai, settings
):
    settings.AGENT_WORKER_MAX_ITERS = 1
    fake_openai.output = None  # it answers in plain text, whatever it is asked
    body = user_input("Say hello")
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get().status == Run.Status.COMPLETED
    [end] = payloads(body["runId"], "TEXT_MESSAGE_END")
    assert end["answer"] == "Hello from the fake model."  # the last call's text, once
    assert end["status"] == "partial_success" and end["result_type"] == "unknown"
    deltas = [p["delta"] for p in payloads(body["runId"], "TEXT_MESSAGE_CONTENT")]
    assert "".join(deltas) == end["answer"]


def test_the_memory_stage_keeps_a_fact_that_the_users_later_runs_read(
    alice, bob, redis_queue, fake_openai, settings
):
    settings.AGENT_WORKER_MODEL = "demo"  # the memory stage runs on the demo model too
    first = user_input("Please remember that I work from Berlin.")
    post_run(alice, first)
    work_burst(redis_queue)

    memory = UserMemory.objects.get()
    assert memory.content == "I work from Berlin" and memory.owner.username == "alice"
    assert memory.source_run is not None and memory.source_run.run_id == first["runId"]
    tool_events = [p for p in payloads(first["runId"]) if p["type"].startswith("TOOL_CALL")]
    assert [p["type"] for p in tool_events] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert {p["stage"] for p in tool_events} == {"memory"}
    assert tool_events[-1]["tool_name"] == "memory_remember"
    assert tool_events[-1]["status"] == "success"
    stored = Message.objects.get(role="tool")
    assert stored.metadata["stage"] == "memory"
    assert not stored.visibility_mask & Visibility.UI_HISTORY

    # A later run of alice, in another thread, reads it; bob's does not.
    settings.AGENT_WORKER_MODEL = "openai/gpt-test"
    post_run(alice, user_input("Where do I work?"))
    work_burst(redis_queue)
    post_run(bob, user_input("Where do I work?"))
    work_burst(redis_queue)
    alice_request, bob_request = fake_openai.requests
    assert "I work from Berlin" in str(alice_request["body"]["messages"][0]["content"])
    assert "Berlin" not in json.dumps(bob_request["body"])


def test_an_agent_without_a_memory_stage_runs_none(alice, redis_queue):
    AutomationJob.objects.create(name="digest", config={"enabled_tools": ["calendar_list"]})
    body = user_input(
        "Please remember that I like tea.",
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "digest"}],
    )
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get().status == Run.Status.COMPLETED
    steps = [p["stepName"] for p in payloads(body["runId"], "STEP_STARTED")]
    assert steps == ["router", "worker"]
    assert not UserMemory.objects.exists()


def test_a_failing_memory_stage_leaves_the_delivered_answer_standing(alice, redis_queue, settings):
    with FakeOpenAI() as broken:
        broken.status = 500
        settings.AGENT_MEMORY_MODEL = "deepseek/deepseek-chat"
        settings.DEEPSEEK_API_KEY = "sk-test"
        settings.DEEPSEEK_BASE_URL = broken.base_url
        settings.AGENT_MODEL_MAX_RETRIES = 0
        body = user_input("Please remember that I like tea.")
        post_run(alice, body)
        work_burst(redis_queue)

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, run.error
    assert broken.requests  # the memory stage did call its model
    types = [p["type"] for p in payloads(body["runId"])]
    assert types[-3:] == ["STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert Message.objects.filter(role="assistant").count() == 1
    assert not UserMemory.objects.exists()


def test_every_model_call_keeps_the_providers_raw_usage(settings):
    """The usage AgentScope parses drops fields the billing needs; the tracking model keeps
    the provider's raw usage beside it (docs/spec/sse-events-and-usage.md 5.2)."""
    raw = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "prompt_cache_hit_tokens": 100,
        "prompt_cache_miss_tokens": 20,
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    with FakeOpenAI() as fake:
        fake.usage = raw
        settings.DEEPSEEK_API_KEY = "sk-test"
        settings.DEEPSEEK_BASE_URL = fake.base_url
        log = UsageLog(stage="router")
        model = chat_model_for("deepseek/deepseek-chat", usage_log=log)
        response = run_coroutine(
            model.generate_structured_output(
                conversation((), "Hello"), structured_model=RouteDecision
            )
        )

    assert response.content == fake.route
    [call] = log.calls
    assert call.model_id == "deepseek/deepseek-chat"
    assert call.usage["input_tokens"] == 120 and call.usage["output_tokens"] == 30
    assert call.metadata["prompt_cache_hit_tokens"] == 100
    assert call.metadata["prompt_cache_miss_tokens"] == 20
    assert call.metadata["completion_tokens_details"]["reasoning_tokens"] == 12
    assert call.metadata["total_tokens"] == 150


def test_remembering_a_fact_again_keeps_one_and_makes_it_the_newest(alice, settings):
    from agent_runs.services.memory import user_memory_add

    settings.AGENT_MEMORY_MAX_ITEMS = 2
    from django.contrib.auth import get_user_model

    user_id = get_user_model().objects.get(username="alice").pk
    first = user_memory_add(user_id=user_id, content="Likes tea", kind="preference", run_pk=None)
    user_memory_add(user_id=user_id, content="Works in Berlin", kind="fact", run_pk=None)
    again = user_memory_add(
        user_id=user_id, content="  Likes   tea ", kind="preference", run_pk=None
    )
    user_memory_add(user_id=user_id, content="Has a dog", kind="fact", run_pk=None)

    assert again.pk == first.pk
    # Only the newest two are kept: the fact remembered again outlives the older one.
    kept = set(UserMemory.objects.values_list("content", flat=True))
    assert kept == {"Likes tea", "Has a dog"}
