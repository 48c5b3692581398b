"""MCP tool servers (docs/tools.md, "MCP tool servers"): a real MCP server (the ``mcp``
package's, streamable HTTP on loopback) whose tools the worker is offered beside the
built-in ones and calls in whole runs done by a real RQ worker, the model a loopback
OpenAI-compatible server asking for the tool: a call that runs, one that waits for
approval, one that times out, and one of a server that is down, each a tool event and
never the run's failure."""

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runs.agent_config import McpServer, system_agents
from agent_runs.models import AutomationJob, Interrupt, Run, RunEvent
from agent_runs.runtime.agents import mcp_tools
from tests.agent_runs.protocols.agui.test_interrupt_rules import Interrupted, approve, post
from tests.conftest import free_port, post_run, run_input, work_burst
from tests.fake_llm import FakeOpenAI, backend_tool_names
from tests.mcp_server import LoopbackMcpServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def orders() -> Iterator[LoopbackMcpServer]:
    with LoopbackMcpServer() as server:
        yield server


def servers(orders: LoopbackMcpServer) -> list[dict[str, Any]]:
    """The worker's MCP servers: the orders server twice (its reads as they are, its
    cancellation only with approval), and a warehouse server nobody runs."""
    return [
        {
            "name": "orders",
            "url": orders.url,
            "headers_from_env": {"Authorization": "ORDERS_MCP_TOKEN"},
            "allowed_tools": ["lookup_order", "slow_report"],
        },
        {
            "name": "orders-admin",
            "url": orders.url,
            "allowed_tools": ["cancel_order"],
            "require_approval": True,
        },
        {
            "name": "warehouse",
            "url": f"http://127.0.0.1:{free_port()}/mcp",
            "allowed_tools": ["stock_level"],
        },
    ]


@pytest.fixture
def mcp_config(
    tmp_path: Path, settings: Any, monkeypatch: Any, orders: LoopbackMcpServer
) -> Iterator[Path]:
    monkeypatch.setenv("ORDERS_MCP_TOKEN", "Bearer orders-secret")
    config = tmp_path / "system_agents.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agents": {
                    "worker": {"enabled_tools": ["calendar_list"], "mcp_servers": servers(orders)}
                }
            }
        )
    )
    settings.AGENT_SYSTEM_AGENTS_FILE = str(config)
    system_agents.cache_clear()
    yield config
    system_agents.cache_clear()


def tool_events(run_id: str, kind: str) -> list[dict[str, Any]]:
    return [
        event.payload
        for event in RunEvent.objects.filter(run__run_id=run_id, type=kind).order_by("seq")
    ]


def tool_results_sent(fake: FakeOpenAI) -> list[str]:
    """The tool results the model was given, in the order of its requests."""
    return [
        str(message.get("content"))
        for request in fake.requests
        for message in request["body"].get("messages", [])
        if message.get("role") == "tool"
    ]


def ask_for(fake: FakeOpenAI, tool: str, arguments: dict[str, Any]) -> None:
    fake.tool_call_turns = [[("call_m1", tool, json.dumps(arguments))]]
    fake.answer = ["Done."]


def test_the_worker_calls_an_mcp_tool_beside_the_built_in_ones(
    alice, redis_queue, fake_openai, mcp_config, orders
):
    ask_for(fake_openai, "mcp__orders__lookup_order", {"order_id": "A7"})
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED
    # Offered beside the built-in tool: what allowed_tools lets through of each server, the
    # tools of the server that is down (which it allows) too.
    assert backend_tool_names(fake_openai.requests[0]) == [
        "calendar_list",
        "mcp__orders-admin__cancel_order",
        "mcp__orders__lookup_order",
        "mcp__orders__slow_report",
        "mcp__warehouse__stock_level",
    ]
    offered = {
        t["function"]["name"]: t["function"] for t in fake_openai.requests[0]["body"]["tools"]
    }
    lookup = offered["mcp__orders__lookup_order"]
    assert lookup["description"] == "Look up an order's status by its id."
    assert lookup["parameters"]["required"] == ["order_id"]
    # The server ran it, with the header the environment gave; the result streamed as a
    # tool event and reached the model.
    assert orders.calls == [("lookup_order", {"order_id": "A7"})]
    assert {h.get("authorization") for h in orders.headers} >= {"Bearer orders-secret"}
    (start,) = tool_events(body["runId"], "TOOL_CALL_START")
    assert start["toolCallName"] == "mcp__orders__lookup_order"
    (result,) = tool_events(body["runId"], "TOOL_CALL_RESULT")
    assert result["status"] == "success"
    assert result["result"] == "Order A7: shipped on 2026-03-02"
    assert tool_results_sent(fake_openai) == ["Order A7: shipped on 2026-03-02"]


def test_an_mcp_tool_that_requires_approval_runs_only_once_approved(
    alice, redis_queue, fake_openai, mcp_config, orders
):
    interrupted = Interrupted(
        alice,
        fake_openai,
        redis_queue,
        [("call_x1", "mcp__orders-admin__cancel_order", json.dumps({"order_id": "A7"}))],
    )

    (interrupt,) = interrupted.interrupts
    assert interrupt.kind == Interrupt.Kind.APPROVAL
    assert interrupt.tool_name == "mcp__orders-admin__cancel_order"
    assert interrupt.arguments == {"order_id": "A7"}
    schema = interrupt.response_schema or {}
    assert schema["properties"]["arguments"]["required"] == ["order_id"]
    assert orders.calls == []  # nothing ran before the answer

    fake_openai.answer = ["Cancelled."]
    assert post(alice, interrupted.resume(approve(interrupt))).status_code == 202
    work_burst(redis_queue)

    assert orders.calls == [("cancel_order", {"order_id": "A7"})]
    resumed = Run.objects.exclude(pk=interrupted.run.pk).get(thread_id=interrupted.thread_id)
    assert resumed.status == Run.Status.COMPLETED
    (result,) = tool_events(resumed.run_id, "TOOL_CALL_RESULT")
    assert (result["status"], result["result"]) == ("success", "Order A7 cancelled")


def test_an_mcp_tool_that_takes_too_long_fails_as_a_tool_error(
    alice, redis_queue, fake_openai, mcp_config, orders, settings
):
    settings.MCP_TOOL_TIMEOUT_SECONDS = 1
    orders.slow_seconds = 30
    ask_for(fake_openai, "mcp__orders__slow_report", {})
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get(run_id=body["runId"]).status == Run.Status.COMPLETED
    assert orders.calls == [("slow_report", {})]
    (result,) = tool_events(body["runId"], "TOOL_CALL_RESULT")
    said = "MCP tool 'slow_report' of server 'orders' gave no result within 1 s"
    assert (result["status"], result["error"]) == ("failure", said)
    # The model read the error and answered.
    assert tool_results_sent(fake_openai) == [said]
    (end,) = tool_events(body["runId"], "TEXT_MESSAGE_END")
    assert end["answer"] == "Done."


def test_a_tool_of_a_server_that_is_down_fails_as_a_tool_error(
    alice, redis_queue, fake_openai, mcp_config
):
    ask_for(fake_openai, "mcp__warehouse__stock_level", {"sku": "X1"})
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get(run_id=body["runId"]).status == Run.Status.COMPLETED
    (result,) = tool_events(body["runId"], "TOOL_CALL_RESULT")
    assert result["status"] == "failure"
    assert result["error"].startswith("MCP server 'warehouse' is unreachable: ")
    assert tool_results_sent(fake_openai) == [result["error"]]


def test_an_automation_job_names_its_own_mcp_servers(alice, redis_queue, fake_openai, orders):
    AutomationJob.objects.create(
        name="order-digest",
        config={
            "enabled_tools": [],
            "mcp_servers": [
                {"name": "orders", "url": orders.url, "allowed_tools": ["lookup_order"]}
            ],
        },
    )
    ask_for(fake_openai, "mcp__orders__lookup_order", {"order_id": "B2"})
    body = run_input(
        forwardedProps={"runtime_mode": "automation"},
        context=[{"description": "automation_job", "value": "order-digest"}],
    )
    post_run(alice, body)
    work_burst(redis_queue)

    assert Run.objects.get(run_id=body["runId"]).status == Run.Status.COMPLETED
    assert backend_tool_names(fake_openai.requests[0]) == ["mcp__orders__lookup_order"]
    assert orders.calls == [("lookup_order", {"order_id": "B2"})]


def test_a_servers_tools_are_listed_once_for_many_runs(
    alice, redis_queue, fake_openai, mcp_config, orders
):
    bodies = [run_input() for _ in range(3)]
    for body in bodies:
        post_run(alice, body)
    work_burst(redis_queue)

    runs = Run.objects.filter(run_id__in=[body["runId"] for body in bodies])
    assert {run.status for run in runs} == {Run.Status.COMPLETED}
    # Its two entries (orders, orders-admin) are listed apart, each once for the three runs.
    assert orders.methods.count("tools/list") == 2
    assert all("mcp__orders__lookup_order" in backend_tool_names(r) for r in fake_openai.requests)


@pytest.mark.parametrize("most", [1, 2])
def test_a_process_keeps_at_most_so_many_sessions_with_a_server(orders, settings, most):
    settings.MCP_MAX_CONNECTIONS_PER_SERVER = most
    settings.MCP_TOOL_TIMEOUT_SECONDS = 30
    orders.slow_seconds = 2  # long enough for the calls to overlap on a loaded machine
    server = McpServer(name="orders", url=orders.url, allowed_tools=["slow_report"])

    async def three_calls() -> list[Any]:
        (tool,) = await mcp_tools([server])
        return await asyncio.gather(*(tool() for _ in range(3)))

    results = asyncio.run(three_calls())

    assert [result.content[0].text for result in results] == ["the report"] * 3
    assert orders.most_running == most
