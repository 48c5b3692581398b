"""The MCP tool servers agent configs name (docs/tools.md, "MCP tool servers"): a session
with one, over its transport and with its headers, and the tools it offers.

A worker holds many runs on one event loop: a server's tools are listed once per process and
kept ``TOOLS_CACHE_SECONDS`` (a failed listing ``FAILURE_CACHE_SECONDS``, so that a server
that is down is not asked by every run), runs that need them meanwhile wait for the one
listing; and a process has at most ``MCP_MAX_CONNECTIONS_PER_SERVER`` sessions open with one
server, the others waiting their turn. The runtime calls the tools through AgentScope's MCP
tool (agent_runs/runtime/tools/mcp.py); the admin and ``manage.py mcp_check`` list them
here."""

import asyncio
import contextlib
import logging
import re
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

import mcp
from asgiref.sync import async_to_sync
from django.conf import settings
from mcp.client.sse import sse_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import Tool

from agent_runs.agent_config import MCP_TOOL_PREFIX, McpServer, StageConfig, system_agents
from agent_runs.models import AutomationJob

logger = logging.getLogger(__name__)

TOOLS_CACHE_SECONDS = 60.0
FAILURE_CACHE_SECONDS = 5.0
_MAX_PAGES = 20


@dataclass(frozen=True)
class ServerTools:
    """What a server offers a stage: its tools (those ``allowed_tools`` lets through), or
    why they could not be listed."""

    server: McpServer
    tools: tuple[Tool, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class ConfiguredServer:
    """An MCP server as an agent config names it: where (``system_agents.yaml`` and the
    stage, or the automation job) and the server."""

    where: str
    server: McpServer


class _LoopState:
    """What is bound to one event loop: a lock per server's listing and a semaphore per
    server's sessions."""

    def __init__(self) -> None:
        self.listing: dict[str, asyncio.Lock] = {}
        self.sessions: dict[str, asyncio.Semaphore] = {}


_loops: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]" = (
    weakref.WeakKeyDictionary()
)
# Per server (its config as JSON): when its listing expires, and the listing.
_listings: dict[str, tuple[float, ServerTools]] = {}


def _loop_state() -> _LoopState:
    loop = asyncio.get_running_loop()
    state = _loops.get(loop)
    if state is None:
        state = _loops[loop] = _LoopState()
    return state


def _key(server: McpServer) -> str:
    return server.model_dump_json()


@contextlib.asynccontextmanager
async def mcp_session(server: McpServer) -> AsyncIterator[mcp.Client]:
    """A connected MCP client of the server, over its transport, with its headers (one of
    the process's bounded sessions with it)."""
    sessions = _loop_state().sessions
    if server.url not in sessions:  # entries naming one URL share its sessions
        sessions[server.url] = asyncio.Semaphore(settings.MCP_MAX_CONNECTIONS_PER_SERVER)
    timeout = settings.MCP_TOOL_TIMEOUT_SECONDS
    async with sessions[server.url], contextlib.AsyncExitStack() as stack:
        if server.transport == "sse":
            transport = sse_client(server.url, headers=server.headers(), timeout=timeout)
        else:
            # The call's own deadline (MCP_TOOL_TIMEOUT_SECONDS) bounds each request.
            http_client = create_mcp_http_client(headers=server.headers())
            await stack.enter_async_context(http_client)
            transport = streamable_http_client(server.url, http_client=http_client)
        yield await stack.enter_async_context(mcp.Client(transport))


async def mcp_server_tools(server: McpServer, *, fresh: bool = False) -> ServerTools:
    """The tools the server offers (those ``allowed_tools`` lets through), listed once per
    process and kept a while; a server that cannot be reached gives its error instead.
    ``fresh``: list them anew."""
    key = _key(server)
    listing = _listings.get(key)
    if listing is not None and listing[0] > time.monotonic() and not fresh:
        return listing[1]
    locks = _loop_state().listing
    lock = locks.setdefault(key, asyncio.Lock())
    async with lock:
        listing = _listings.get(key)
        if listing is not None and listing[0] > time.monotonic() and not fresh:
            return listing[1]  # listed meanwhile, by the run that held the lock
        found = await _list_tools(server)
        keep = FAILURE_CACHE_SECONDS if found.error else TOOLS_CACHE_SECONDS
        _listings[key] = (time.monotonic() + keep, found)
        return found


async def _list_tools(server: McpServer) -> ServerTools:
    try:
        async with asyncio.timeout(settings.MCP_TOOL_TIMEOUT_SECONDS):
            async with mcp_session(server) as client:
                listed = await _all_tools(client)
    except TimeoutError:
        error = f"no answer within {settings.MCP_TOOL_TIMEOUT_SECONDS:g} s"
        logger.warning("MCP server %r (%s): %s", server.name, server.url, error)
        return ServerTools(server=server, error=error)
    except Exception as exc:  # a server that is down, refuses us, or answers nonsense
        error = error_text(exc)
        logger.warning("MCP server %r (%s) lists no tools: %s", server.name, server.url, error)
        return ServerTools(server=server, error=error)
    allowed = server.allowed_tools
    tools = tuple(tool for tool in listed if allowed is None or tool.name in allowed)
    return ServerTools(server=server, tools=tools)


async def _all_tools(client: mcp.Client) -> list[Tool]:
    """Every page of the server's tools (at most ``_MAX_PAGES``)."""
    tools: list[Tool] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def offered_tool_name(server: McpServer, tool_name: str) -> str:
    """The name the model is offered a server's tool by, as AgentScope's MCP tool makes it:
    ``mcp__<server>__<tool>``, a character a provider refuses in a name made an ``x``."""
    return f"{MCP_TOOL_PREFIX}{server.name}__{re.sub(r'[^a-zA-Z0-9_-]', 'x', tool_name)}"


def error_text(exc: BaseException) -> str:
    """What went wrong, for a person: the first error inside the task groups of the MCP
    client (whose own message only counts them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def mcp_servers_report(*, fresh: bool) -> list[tuple[ConfiguredServer, ServerTools]]:
    """Every configured MCP server with what it offers (``fresh``: listed anew, else as
    this process keeps it), for the admin and ``manage.py mcp_check``."""
    configured = mcp_servers_configured()

    async def listings() -> list[ServerTools]:
        return await asyncio.gather(
            *(mcp_server_tools(item.server, fresh=fresh) for item in configured)
        )

    return list(zip(configured, async_to_sync(listings)(), strict=True))


def mcp_servers_configured() -> list[ConfiguredServer]:
    """Every MCP server an agent config names: each stage's in ``system_agents.yaml``, then
    each automation job's (a job's config that does not validate names none)."""
    found = [
        ConfiguredServer(where=f"system agents: {stage}", server=server)
        for stage, config in system_agents().agents.items()
        for server in config.mcp_servers
    ]
    for job in AutomationJob.objects.order_by("name"):
        for stage, config in _job_stage_configs(job.config):
            found.extend(
                ConfiguredServer(where=f"automation job {job.name!r}: {stage}", server=server)
                for server in config.mcp_servers
            )
    return found


def _job_stage_configs(config: object) -> list[tuple[str, StageConfig]]:
    """An automation job's configs: one for every stage, or one per stage under its name."""
    if not isinstance(config, dict):
        return []
    per_stage = {
        stage: value
        for stage, value in config.items()
        if stage in ("router", "worker", "memory") and isinstance(value, dict)
    }
    candidates = per_stage or {"every stage": config}
    configs = []
    for stage, value in candidates.items():
        try:
            configs.append((stage, StageConfig.model_validate(value)))
        except ValueError:
            continue
    return configs
