"""Runtime modes: chat runs take their tools and context from system_agents.yaml,
automation runs from the AutomationJob they name."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent_runs.agent_config import system_agents
from agent_runs.models import AutomationJob, Run, Thread
from tests.conftest import post_run, run_input, work_burst
from tests.fake_llm import backend_tool_names


def tool_names(request):
    return backend_tool_names(request)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_chat_and_automation_runs_get_different_tool_sets(alice, redis_queue, fake_openai):
    AutomationJob.objects.create(
        name="daily-digest",
        config={"enabled_tools": ["calendar_list"], "context": "Only ever list events."},
    )
    post_run(alice, run_input())
    automation = run_input(
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "daily-digest"}],
    )
    post_run(alice, automation)
    work_burst(redis_queue)

    assert set(Run.objects.values_list("status", flat=True)) == {Run.Status.COMPLETED}
    # The worker runs both jobs at once: tell the two model calls apart by their system prompt.
    automation_request, chat_request = sorted(
        fake_openai.requests,
        key=lambda request: "Only ever list events." not in str(request["body"]["messages"][0]),
    )
    assert tool_names(chat_request) == [
        "calendar_create",
        "calendar_delete",
        "calendar_list",
        "calendar_update",
    ]
    assert tool_names(automation_request) == ["calendar_list"]
    system = automation_request["body"]["messages"][0]
    assert system["role"] == "system" and "Only ever list events." in str(system["content"])
    assert "calendar" in str(chat_request["body"]["messages"][0]["content"])  # the yaml context


@pytest.mark.django_db
def test_an_automation_run_must_name_an_existing_job(alice, redis_queue):
    body = run_input(
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "nope"}],
    )
    response = post_run(alice, body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("invalid RunAgentInput.context:")
    assert Run.objects.count() == Thread.objects.count() == 0


def test_a_bad_system_agents_file_stops_with_the_file_and_the_reason(tmp_path):
    bad = tmp_path / "system_agents.yaml"
    bad.write_text("agents:\n  worker:\n    enabled_tools: [launch_rockets]\n")
    with pytest.raises(ImproperlyConfigured, match="launch_rockets") as error:
        system_agents(bad)
    assert str(bad) in str(error.value)
    bad.write_text("agents: [not, a, mapping")
    with pytest.raises(ImproperlyConfigured, match=str(bad)):
        system_agents.__wrapped__(bad)


@pytest.fixture
def operator_config(tmp_path, settings):
    config = tmp_path / "system_agents.yaml"
    config.write_text(
        "tools:\n"
        "  word_count: tests.operator_tools.word_count\n"
        "agents:\n"
        "  worker:\n"
        "    enabled_tools: [word_count, calendar_list]\n"
    )
    settings.AGENT_SYSTEM_AGENTS_FILE = str(config)
    system_agents.cache_clear()
    yield config
    system_agents.cache_clear()


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_an_operator_tool_named_by_dotted_path_is_called(
    alice, alice_token, redis_queue, daphne_port, fake_openai, operator_config
):
    import json

    from tests.agent_runs.sse import read_sse

    fake_openai.tool_call_turns = [[("call_w", "word_count", json.dumps({"text": "a b c"}))]]
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    assert tool_names(fake_openai.requests[0]) == ["calendar_list", "word_count"]
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    result = next(f["data"] for f in stream.events if f["event"] == "TOOL_CALL_RESULT")
    assert result["status"] == "success"
    assert json.loads(result["result"]) == {"words": 3, "users": 1}


def test_an_operator_tool_that_cannot_be_imported_stops_the_start(tmp_path):
    bad = tmp_path / "system_agents.yaml"
    bad.write_text("tools:\n  nope: tests.operator_tools.missing\nagents: {}\n")
    with pytest.raises(ImproperlyConfigured, match="operator tool 'nope'"):
        system_agents.__wrapped__(bad)
