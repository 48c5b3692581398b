"""The tools of a stage's MCP servers (docs/tools.md, "MCP tool servers"), as AgentScope
tools: each call is AgentScope's MCP tool over a session of the server's
(``agent_runs.mcp_servers``), timed out after ``MCP_TOOL_TIMEOUT_SECONDS``. A call that
fails (the server down, too slow, or its error) is the tool's error, which the model reads;
the run goes on."""

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

from agentscope.permission import PermissionDecision
from agentscope.tool import MCPTool, ToolBase, ToolChunk
from django.conf import settings
from mcp.types import Tool

from agent_runs.agent_config import McpServer
from agent_runs.mcp_servers import (
    ServerTools,
    error_text,
    mcp_server_tools,
    mcp_session,
    offered_tool_name,
)


class McpToolError(Exception):
    """An MCP tool's call failed; its message is the tool result the model reads."""


class ServerTool(MCPTool):
    """A tool of an MCP server, offered as ``mcp__<server>__<tool>``; its calls wait for a
    person's approval when the server's config requires it."""

    def __init__(self, *, server: McpServer, tool: Tool, permission: PermissionDecision):
        super().__init__(
            mcp_name=server.name,
            tool=tool,
            client_gen=functools.partial(mcp_session, server),
        )
        self.server = server
        self._permission = permission

    async def check_permissions(self, *_args: Any, **_kwargs: Any) -> PermissionDecision:
        return self._permission

    async def call(self, **kwargs: Any) -> Any:
        timeout = settings.MCP_TOOL_TIMEOUT_SECONDS
        what = f"MCP tool {self._tool.name!r} of server {self.server.name!r}"
        try:
            async with asyncio.timeout(timeout):
                return await super().call(**kwargs)
        except TimeoutError:
            raise McpToolError(f"{what} gave no result within {timeout:g} s") from None
        except Exception as exc:
            raise McpToolError(f"{what} failed: {error_text(exc)}") from None


class UnreachableServerTool(ToolBase):
    """A tool ``allowed_tools`` names on a server whose tools could not be listed: offered
    all the same, its call is the tool error that says why."""

    def __init__(self, *, listing: ServerTools, tool_name: str, permission: PermissionDecision):
        super().__init__()
        self.name = offered_tool_name(listing.server, tool_name)
        self.description = f"{tool_name} (MCP server {listing.server.name})"
        self.input_schema = {"type": "object", "properties": {}}
        self.is_concurrency_safe = True
        self.is_read_only = False
        self.is_external_tool = False
        self.is_mcp = False
        self._error = f"MCP server {listing.server.name!r} is unreachable: {listing.error}"
        self._permission = permission

    async def check_permissions(self, *_args: Any, **_kwargs: Any) -> PermissionDecision:
        return self._permission

    async def call(self, **_kwargs: Any) -> ToolChunk:
        raise McpToolError(self._error)


async def mcp_tools_for(
    servers: Sequence[McpServer], *, allow: PermissionDecision, ask: PermissionDecision
) -> list[ToolBase]:
    """The tools of the stage's MCP servers (listed at once, each once per process and kept
    a while); a server that cannot be reached offers the tools it allows, which fail."""
    listings = await asyncio.gather(*(mcp_server_tools(server) for server in servers))
    tools: list[ToolBase] = []
    for listing in listings:
        permission = ask if listing.server.require_approval else allow
        if listing.error is None:
            tools.extend(
                ServerTool(server=listing.server, tool=tool, permission=permission)
                for tool in listing.tools
            )
        else:
            tools.extend(
                UnreachableServerTool(listing=listing, tool_name=name, permission=permission)
                for name in listing.server.allowed_tools or ()
            )
    return tools
