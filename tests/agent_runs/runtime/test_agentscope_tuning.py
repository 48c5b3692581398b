"""The AgentScope speed-ups change nothing AgentScope does: tool inputs are still validated,
the structured output keeps its schema, the meta tool its groups
(agent_runs/runtime/agentscope_tuning.py).
"""

from typing import Any

import jsonschema
import pytest
from agentscope.agent import _agent as agentscope_agent_module
from agentscope.model import _base as agentscope_model_module
from agentscope.tool import Toolkit
from agentscope.tool import _adapters as agentscope_adapters_module
from agentscope.tool import _toolkit as agentscope_toolkit_module
from agentscope.tool._tool_group import ToolGroup
from agentscope.tool._utils import _extract_input_schema

from agent_runs.runtime import agentscope_tuning
from agent_runs.runtime.agents import WORKER_SYSTEM_PROMPT, conversation, worker_reply
from agent_runs.runtime.agentscope_events import RunMappingState, map_agentscope_event
from agent_runs.runtime.async_bridge import drain, run_coroutine
from agent_runs.runtime.chat_models import chat_model_for
from agent_runs.runtime.demo_model import DEMO_MODEL_ID
from agent_runs.runtime.output import AgentOutput

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
}


@pytest.fixture(autouse=True, scope="module")
def _tuned() -> None:
    """As the worker does when it starts."""
    agentscope_tuning.apply()


def test_the_pipeline_has_applied_the_tuning_to_agentscope():
    assert agentscope_agent_module.jsonschema.validate is agentscope_tuning.validate
    assert (
        agentscope_agent_module._GenerateStructuredOutput is agentscope_tuning.StructuredOutputTool
    )
    assert agentscope_toolkit_module.ResetTools is agentscope_tuning.MetaTool
    assert (
        agentscope_adapters_module._extract_input_schema is agentscope_tuning.extract_input_schema
    )
    assert agentscope_model_module.jsonschema.validate is agentscope_tuning.validate


def test_a_tool_schema_is_derived_once_per_function_code_and_is_what_agentscope_derives():
    def make(bias: int):
        async def shift(number: int, places: int = 1) -> int:
            """Shift a number.

            Args:
                number: The number to shift.
                places: How far.
            """
            return number + places + bias

        return shift

    async def other(text: str) -> str:
        """Echo a text."""
        return text

    first, second = make(1), make(2)  # two runs' closures of the same code

    schema = agentscope_tuning.extract_input_schema(first)
    assert agentscope_tuning.extract_input_schema(second) is schema
    assert schema == _extract_input_schema(second)
    assert set(schema["properties"]) == {"number", "places"} and schema["required"] == ["number"]
    assert set(agentscope_tuning.extract_input_schema(other)["properties"]) == {"text"}


def test_validate_accepts_what_jsonschema_accepts_and_rejects_what_it_rejects():
    agentscope_tuning.validate({"a": 1}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError) as caught:
        agentscope_tuning.validate({"a": "one"}, SCHEMA)
    assert caught.value.json_path == "$.a"
    with pytest.raises(jsonschema.ValidationError):
        agentscope_tuning.validate({}, SCHEMA)


def test_validate_checks_the_schema_itself_once_and_still_refuses_a_bad_one():
    agentscope_tuning._validator_for.cache_clear()
    agentscope_tuning.validate({"a": 1}, dict(SCHEMA))
    agentscope_tuning.validate({"a": 2}, dict(SCHEMA))  # an equal schema, another object
    assert agentscope_tuning._validator_for.cache_info().misses == 1
    with pytest.raises(jsonschema.SchemaError):
        agentscope_tuning.validate({"a": 1}, {"type": "no-such-type"})


def test_the_structured_output_tool_gives_its_schema_once_per_tool_without_titles():
    schema = AgentOutput.model_json_schema()
    tool = agentscope_tuning.StructuredOutputTool(schema=schema)

    first = tool.input_schema
    assert tool.input_schema is first
    assert "title" not in first and set(first["properties"]) == set(schema["properties"])
    assert first is not schema and "title" in schema  # the caller's schema is left alone
    assert agentscope_tuning.StructuredOutputTool(schema=schema).input_schema is not first


def test_the_meta_tool_schema_follows_the_tool_groups():
    plain = Toolkit(tools=[]).builtin_meta_tool.tool
    grouped = Toolkit(
        tools=[], tool_groups=[ToolGroup(name="travel", description="Book trips", tools=[])]
    ).builtin_meta_tool.tool

    assert plain.input_schema["properties"] == {}
    assert set(grouped.input_schema["properties"]) == {"travel"}
    assert grouped.input_schema["properties"]["travel"]["description"] == "Book trips"


def test_a_tool_call_with_invalid_arguments_is_still_refused_before_the_tool_runs():
    calls: list[Any] = []

    async def add_one(a: int) -> dict[str, int]:
        """Add one to a number."""
        calls.append(a)
        return {"result": a + 1}

    reply = worker_reply(
        model=chat_model_for(DEMO_MODEL_ID),
        messages=conversation((), '/tool add_one {"a": "not a number"}'),
        tools=[add_one],
        system_prompt=WORKER_SYSTEM_PROMPT,
        max_iters=2,
    )
    state = RunMappingState(thread_id="t", run_id="r", stage="worker", message_id="m")
    results = [
        event
        for item in run_coroutine(drain(reply))
        if not hasattr(item, "structured_output")
        for event in map_agentscope_event(item, state)
        if event.type == "TOOL_CALL_RESULT"
    ]

    assert calls == []
    assert results
    result = results[0].model_dump()
    assert result["status"] == "failure"
    assert "Input validation failed for tool 'add_one'" in (result["error"] or "")
