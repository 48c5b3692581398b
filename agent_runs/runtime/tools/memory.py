"""The memory stage's tools: remember or forget one thing about the run's user.

Results are compact facts (ids, status, counts), as docs/spec/sse-events-and-usage.md asks."""

from collections.abc import Callable
from typing import Any

from agent_runs.db import db_call
from agent_runs.runtime.tools.context import ToolContext
from agent_runs.selectors.context import user_memory_count
from agent_runs.services.memory import user_memory_add, user_memory_forget


def memory_tools(context: ToolContext) -> list[Callable[..., Any]]:
    """The memory tools bound to one run's user."""

    async def memory_remember(content: str, kind: str = "fact") -> dict[str, Any]:
        """Remember one durable fact or preference about the user for later conversations.

        Args:
            content: One short sentence, e.g. "Prefers meetings after 10:00".
            kind: "fact" or "preference".
        """
        return await db_call(_remember, context, content, kind)

    async def memory_forget(memory_id: int) -> dict[str, Any]:
        """Forget a remembered item that is no longer true.

        Args:
            memory_id: The item's id, as listed in what you know about the user.
        """
        return await db_call(_forget, context, memory_id)

    return [memory_remember, memory_forget]


def _remember(context: ToolContext, content: str, kind: str) -> dict[str, Any]:
    memory = user_memory_add(
        user_id=context.user_id, content=content, kind=kind, run_pk=context.run_pk
    )
    count = user_memory_count(user_id=context.user_id)
    return {"id": memory.pk, "status": "remembered", "count": count}


def _forget(context: ToolContext, memory_id: int) -> dict[str, Any]:
    if not user_memory_forget(user_id=context.user_id, memory_id=memory_id):
        raise ValueError(f"no memory {memory_id}")
    return {"id": memory_id, "status": "forgotten"}
