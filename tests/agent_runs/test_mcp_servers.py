"""MCP tool servers in the agent configs (docs/tools.md, "MCP tool servers"): validated when
the config is read, with the reason; listed with their tools by ``manage.py mcp_check`` and
the admin's MCP servers page, against a real MCP server on loopback (streamable HTTP and
SSE) and one that is down."""

from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from agent_runs.agent_config import stage_config, system_agents
from agent_runs.models import AutomationJob, Run
from tests.conftest import free_port, post_run, run_input
from tests.mcp_server import LoopbackMcpServer


def config_file(tmp_path: Path, servers: Any) -> Path:
    path = tmp_path / "system_agents.yaml"
    path.write_text(yaml.safe_dump({"agents": {"worker": {"mcp_servers": servers}}}))
    return path


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ({"name": "a b", "url": "http://127.0.0.1/mcp"}, "MCP server name 'a b'"),
        ({"name": "a", "url": "ftp://example.com/mcp"}, "an http:// or https:// URL"),
        ({"name": "a", "url": "http://x/mcp", "transport": "stdio"}, "'streamable_http' or 'sse'"),
        (
            {"name": "a", "url": "http://x/mcp", "headers_from_env": {"X-Key": "NO_SUCH_VAR_34"}},
            "unset environment variables ['NO_SUCH_VAR_34']",
        ),
        ({"name": "a", "url": "http://x/mcp", "headers": {"X-Key": "s3cret"}}, "headers"),
        ({"url": "http://x/mcp"}, "name"),
    ],
    ids=["name", "url", "transport", "unset-env", "literal-secret", "no-name"],
)
def test_a_bad_mcp_server_stops_the_config_with_the_reason(tmp_path, server, reason):
    path = config_file(tmp_path, [server])
    with pytest.raises(ImproperlyConfigured, match="mcp_servers") as error:
        system_agents.__wrapped__(path)
    assert reason in str(error.value) and str(path) in str(error.value)


def test_two_mcp_servers_of_one_name_are_refused(tmp_path):
    same = {"name": "orders", "url": "http://127.0.0.1/mcp"}
    with pytest.raises(ImproperlyConfigured, match="MCP server names must differ"):
        system_agents.__wrapped__(config_file(tmp_path, [same, same]))


def test_only_the_worker_stage_names_mcp_servers(tmp_path):
    path = tmp_path / "system_agents.yaml"
    server = {"name": "orders", "url": "http://127.0.0.1/mcp"}
    path.write_text(yaml.safe_dump({"agents": {"memory": {"mcp_servers": [server]}}}))
    with pytest.raises(ImproperlyConfigured, match=r"agents\.memory\.mcp_servers: only the worker"):
        system_agents.__wrapped__(path)


def test_a_header_value_is_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDERS_KEY_34", "k-1")
    server = {"name": "orders", "url": "https://mcp.example.com/mcp"}
    path = config_file(tmp_path, [{**server, "headers_from_env": {"X-Key": "ORDERS_KEY_34"}}])
    (parsed,) = system_agents.__wrapped__(path).agents["worker"].mcp_servers
    assert parsed.headers() == {"X-Key": "k-1"}
    assert (parsed.transport, parsed.allowed_tools, parsed.require_approval) == (
        "streamable_http",
        None,
        False,
    )


@pytest.mark.django_db
def test_an_automation_job_with_a_bad_mcp_server_fails_its_stage():
    AutomationJob.objects.create(
        name="bad-mcp", config={"mcp_servers": [{"name": "x", "url": "nope"}]}
    )
    run = Run(runtime_mode=Run.RuntimeMode.AUTOMATION, automation_job="bad-mcp")
    with pytest.raises(ImproperlyConfigured, match=r"(?s)automation job 'bad-mcp': .*url 'nope'"):
        stage_config(run=run, stage="worker")


@pytest.fixture
def orders() -> Iterator[LoopbackMcpServer]:
    with LoopbackMcpServer() as server:
        yield server


@pytest.fixture
def configured(tmp_path, settings, orders) -> Iterator[None]:
    servers = [
        {"name": "orders", "url": orders.url, "allowed_tools": ["lookup_order", "cancel_order"]},
        {"name": "orders-sse", "url": orders.sse_url, "transport": "sse", "require_approval": True},
        {"name": "warehouse", "url": f"http://127.0.0.1:{free_port()}/mcp"},
    ]
    settings.AGENT_SYSTEM_AGENTS_FILE = str(config_file(tmp_path, servers))
    system_agents.cache_clear()
    yield
    system_agents.cache_clear()


@pytest.mark.django_db
def test_mcp_check_lists_what_each_server_offers(configured, orders):
    AutomationJob.objects.create(
        name="digest",
        config={"worker": {"mcp_servers": [{"name": "jobs-orders", "url": orders.url}]}},
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 of 4 MCP servers unreachable"):
        call_command("mcp_check", stdout=out, stderr=err)

    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        f"orders (system agents: worker) {orders.url} [streamable_http]",
        "  mcp__orders__lookup_order: Look up an order's status by its id.",
        "  mcp__orders__cancel_order: Cancel an order.",
    ]
    assert lines[3] == (
        f"orders-sse (system agents: worker) {orders.sse_url} [sse, each call approved by a person]"
    )
    assert lines[4:7] == [
        "  mcp__orders-sse__lookup_order: Look up an order's status by its id.",
        "  mcp__orders-sse__cancel_order: Cancel an order.",
        "  mcp__orders-sse__slow_report: A report that takes a long time.",
    ]
    assert lines[7].startswith("warehouse (system agents: worker) ")
    assert lines[8].startswith("  unreachable: ")
    assert (
        lines[9] == f"jobs-orders (automation job 'digest': worker) {orders.url} [streamable_http]"
    )
    assert len(lines) == 13


@pytest.mark.django_db
def test_mcp_check_says_when_none_are_configured(tmp_path, settings):
    settings.AGENT_SYSTEM_AGENTS_FILE = str(config_file(tmp_path, []))
    system_agents.cache_clear()
    out = StringIO()
    call_command("mcp_check", stdout=out)
    system_agents.cache_clear()
    assert out.getvalue() == "No MCP servers are configured.\n"


@pytest.mark.django_db
def test_the_admin_lists_configured_servers_and_their_tools(configured, staff_client, orders):
    listing = staff_client.get("/admin/agent_runs/automationjob/")
    assert b'href="/admin/agent_runs/automationjob/mcp-servers/"' in listing.content

    page = staff_client.get("/admin/agent_runs/automationjob/mcp-servers/")

    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="module mcp-server"') == 3
    assert "<code>mcp__orders__lookup_order</code>" in html
    assert "<code>mcp__orders-sse__slow_report</code>" in html
    assert "<code>mcp__orders__slow_report</code>" not in html  # not in its allowed_tools
    assert "each call approved by a person" in html
    assert "Unreachable: " in html


@pytest.mark.django_db
def test_the_admin_mcp_servers_page_is_for_staff_only(client, configured):
    response = client.get("/admin/agent_runs/automationjob/mcp-servers/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_a_client_tool_may_not_take_the_name_of_an_mcp_servers_tool(alice, redis_queue):
    tool = {"name": "mcp__orders__lookup_order", "description": "", "parameters": {}}

    response = post_run(alice, run_input(tools=[tool]))

    assert response.status_code == 422
    assert response.json()["detail"] == (
        'RunAgentInput.tools: "mcp__orders__lookup_order" is a backend tool'
    )
    assert not Run.objects.exists()
