"""The AgentScope speed-ups change nothing AgentScope does: tool inputs are still validated,
the structured output keeps its schema, the meta tool its groups
(agent_runs/runtime/agentscope_tuning.py).
"""

import os
from typing import Any

import jsonschema
import pytest
from agentscope._utils import _common as agentscope_common
from agentscope._utils._common import _json_loads_with_repair
from agentscope.agent import ContextConfig
from agentscope.agent import _agent as agentscope_agent_module
from agentscope.agent._config import SummarySchema
from agentscope.exception import ToolJSONDecodeError
from agentscope.message import UserMsg
from agentscope.model import _base as agentscope_model_module
from agentscope.tool import Toolkit
from agentscope.tool import _adapters as agentscope_adapters_module
from agentscope.tool import _toolkit as agentscope_toolkit_module
from agentscope.tool._tool_group import ToolGroup
from agentscope.tool._utils import _extract_func_description, _extract_input_schema

from agent_runs.runtime import agents as agents_module
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


def test_the_tuning_is_applied_to_argument_parsing_descriptions_and_ids():
    for module in (agentscope_agent_module, agentscope_toolkit_module, agentscope_model_module):
        assert module._json_loads_with_repair is agentscope_tuning.json_loads_with_repair
    assert (
        agentscope_adapters_module._extract_func_description
        is agentscope_tuning.extract_func_description
    )
    assert agentscope_common._id_factory is agentscope_tuning.process_ids


@pytest.mark.parametrize(
    "raw",
    [
        '{"answer": "Hi", "status": "success"}',
        '{"answer": "Hi", "key_points": ["a"], "ui_hints": null}',
        '{"answer": "Hi", "status": "maybe"}',  # not in the enum: json_repair's way
        '{"answer": 42}',  # a number for a string: repaired
        '{"answer": "Hi"',  # cut short: repaired
        '{"answer": NaN}',
        "[1, 2]",
        "",
        "not json",
    ],
)
def test_arguments_are_parsed_as_agentscope_parses_them(raw):
    schema = AgentOutput.model_json_schema()

    def outcome(parse):
        try:
            return parse(raw, schema)
        except ToolJSONDecodeError as error:
            return ("refused", str(error))

    assert outcome(agentscope_tuning.json_loads_with_repair) == outcome(_json_loads_with_repair)


def test_valid_arguments_skip_json_repair_and_others_still_reach_it(monkeypatch):
    import json_repair

    repaired: list[str] = []
    original = json_repair.repair_json

    def counting_repair(json_str, *args, **kwargs):
        repaired.append(json_str)
        return original(json_str, *args, **kwargs)

    monkeypatch.setattr(json_repair, "repair_json", counting_repair)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}

    assert agentscope_tuning.json_loads_with_repair('{"n": 1}', schema) == {"n": 1}
    assert repaired == []
    assert agentscope_tuning.json_loads_with_repair('{"n": "42"}', schema) == {"n": 42}
    assert repaired == ['{"n": "42"}']
    assert agentscope_tuning.json_loads_with_repair('{"n": "4"}') == {"n": "4"}  # no schema


def test_a_tool_description_is_parsed_once_per_docstring():
    agentscope_tuning.extract_func_description.cache_clear()
    doc = """Shift a number.

    Further words.

    Args:
        number: The number.
    """
    first = agentscope_tuning.extract_func_description(doc)
    assert agentscope_tuning.extract_func_description(doc) == first
    assert first == _extract_func_description(doc) and first.startswith("Shift a number.")
    assert agentscope_tuning.extract_func_description.cache_info().hits == 1


def test_ids_are_32_hex_digits_unique_in_a_process_and_across_a_fork():
    ids = [agentscope_tuning.process_ids() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(each) == 32 and int(each, 16) >= 0 for each in ids)

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its ids, written back, then out without pytest's cleanup
        os.write(write, agentscope_tuning.process_ids().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    childs = os.read(read, 64).decode()
    os.close(read)
    assert len(childs) == 32 and childs[:20] != agentscope_tuning.process_ids()[:20]


def test_agentscope_entities_take_the_process_ids():
    message = UserMsg(name="user", content="hi")
    assert message.id[:20] == agentscope_tuning.process_ids()[:20]


def test_each_agent_gets_agentscope_s_summary_schema_as_a_copy_of_its_own():
    toolkit = agents_module.WorkerTools().toolkit
    first = agents_module._agent("worker", chat_model_for(DEMO_MODEL_ID), toolkit(), "prompt", 2)
    second = agents_module._agent("worker", chat_model_for(DEMO_MODEL_ID), toolkit(), "prompt", 2)
    schema = first.context_config.summary_schema
    assert schema == SummarySchema.model_json_schema() == ContextConfig().summary_schema
    assert schema is not second.context_config.summary_schema
    assert schema["properties"] is not second.context_config.summary_schema["properties"]
