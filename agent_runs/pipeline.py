"""The agent run on AgentScope: one worker agent answering the run's user message."""

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import AssistantMsg, UserMsg
from agentscope.model import ChatModelBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

WORKER_STAGE = "worker"
WORKER_SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's message clearly."

T = TypeVar("T")
# Backend tools run without asking: without a permission AgentScope stops the reply to ask
# the user (DESIGN.md).
_ALLOWED = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="backend tool")


def worker_reply(
    *,
    user_text: str,
    model: ChatModelBase,
    history: Sequence[tuple[str, str]] = (),
    tools: Sequence[Callable[..., Any]] = (),
    context: str = "",
) -> AsyncIterator[Any]:
    """AgentScope's events for the worker's reply to ``user_text`` after the thread's
    ``history`` of (role, content), then its final ``Msg``."""
    agent = Agent(
        name=WORKER_STAGE,
        system_prompt=f"{WORKER_SYSTEM_PROMPT}\n\n{context}" if context else WORKER_SYSTEM_PROMPT,
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(tool, permission=_ALLOWED) for tool in tools]),
        # Without this AgentScope appends a runtime-state hint block to every prompt.
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    messages = [
        UserMsg(name="user", content=content)
        if role == "user"
        else AssistantMsg(name=WORKER_STAGE, content=content)
        for role, content in history
    ]
    messages.append(UserMsg(name="user", content=user_text))
    return agent.reply_stream(messages, yield_final_msg=True)


def iterate_async(
    generator: AsyncIterator[T],
    *,
    on_idle: Callable[[], None] | None = None,
    idle_after: float = 0.005,
) -> Iterator[T]:
    """Drive an async generator from synchronous code, one item at a time.

    The event loop runs only while the generator computes its next item, so the caller may
    use the ORM between items (Django refuses it while a loop is running in the thread).
    ``on_idle`` is called, with the loop paused, once the generator has been quiet for
    ``idle_after`` seconds (the job flushes its pending events then).
    """
    loop = asyncio.new_event_loop()

    async def next_item() -> T:
        return await anext(generator)

    try:
        while True:
            task = loop.create_task(next_item())
            if on_idle is not None:
                done, _ = loop.run_until_complete(asyncio.wait({task}, timeout=idle_after))
                if not done:
                    on_idle()
            try:
                yield loop.run_until_complete(task)
            except StopAsyncIteration:
                return
    finally:
        close = getattr(generator, "aclose", None)
        if close is not None:
            loop.run_until_complete(close())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
