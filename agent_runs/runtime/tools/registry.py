"""The tools a stage gets: built-ins bound to the run, and operator tools by dotted path."""

import functools
import inspect
from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

from agent_runs.agent_config import StageConfig, system_agents
from agent_runs.db import db_call
from agent_runs.runtime.tools.calendar import calendar_tools
from agent_runs.runtime.tools.context import ToolContext


def tools_for(*, config: StageConfig, context: ToolContext) -> list[Callable[..., Any]]:
    """The tool functions a stage may call: built-ins bound to the run, and operator tools
    (a synchronous one runs on a worker thread, as the ORM requires)."""
    built_in = {tool.__name__: tool for tool in calendar_tools(context)}
    operator = system_agents().tools
    tools = []
    for name in config.enabled_tools:
        if name in built_in:
            tools.append(built_in[name])
        elif name in operator:
            tools.append(_as_async_tool(name, import_string(operator[name])))
    return tools


def _as_async_tool(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(function):
        return function

    @functools.wraps(function)
    async def tool(**kwargs: Any) -> Any:
        return await db_call(function, **kwargs)

    tool.__name__ = name
    return tool
