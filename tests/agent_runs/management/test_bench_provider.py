"""The benchmark's loopback provider (agent_runs/management/commands/bench_provider.py): one
chunk per token, and answers the pipeline's stages accept as they are."""

import json

from agent_runs.management.commands.bench_provider import answer_chunks
from agent_runs.runtime.output import AgentOutput, RouteDecision


def tool(name: str, **properties: object) -> dict[str, object]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"properties": properties}},
    }


def arguments(chunks: list[dict]) -> str:
    return "".join(
        call["function"].get("arguments", "")
        for chunk in chunks
        for call in chunk["delta"].get("tool_calls", [])
    )


def test_the_workers_answer_streams_a_chunk_per_token_as_a_valid_structured_output():
    request = {
        "messages": [{"role": "user", "content": "tokens=250"}],
        "tools": [tool("generate_structured_output", answer={"type": "string"})],
    }

    chunks = answer_chunks(request)

    output = AgentOutput.model_validate(json.loads(arguments(chunks)))
    assert output.answer.split() == [f"word{index}" for index in range(250)]
    assert len(chunks) == 250 + 5  # the role, the call, its head, a token each, its tail, the end
    assert chunks[-1]["finish_reason"] == "tool_calls"


def test_the_router_answers_directly_and_the_memory_stage_keeps_nothing():
    router = answer_chunks(
        {"messages": [], "tools": [tool("generate_structured_output", route={})]}
    )
    assert RouteDecision.model_validate(json.loads(arguments(router))).route == "answer"

    memory = answer_chunks({"messages": [], "tools": [tool("memory_remember")]})
    text = "".join(chunk["delta"].get("content", "") for chunk in memory)
    assert text == "Nothing to remember." and memory[-1]["finish_reason"] == "stop"
