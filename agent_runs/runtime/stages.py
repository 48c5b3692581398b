"""The stages of a run on the worker: the router and the memory here, the worker in
worker_stage.py; each writes its step and its events and stores what it produced
(docs/spec/sse-events-and-usage.md, sections 3 and 8).

Only the worker imports this module (it imports AgentScope through the pipeline).
"""

import logging
import time

from django.conf import settings

from agent_runs.errors import RunNoLongerRunning
from agent_runs.models import Stage, Visibility
from agent_runs.runtime.agents import (
    MEMORY_SYSTEM_PROMPT,
    ROUTER_SYSTEM_PROMPT,
    conversation,
    instructions,
    memory_reply,
    router_decide,
)
from agent_runs.runtime.agentscope_events import (
    reasoning_end_events,
    reasoning_texts,
    tool_results,
)
from agent_runs.runtime.chat_models import chat_model_for
from agent_runs.runtime.host import db_retried, raise_if_cancelled
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.tools.memory import memory_tools
from agent_runs.runtime.turn import RunTurn
from agent_runs.runtime.worker_stage import worker_stage
from agent_runs.services.messages import run_stage_messages_store

__all__ = ["RunTurn", "memory_stage", "router_stage", "worker_stage"]

logger = logging.getLogger(__name__)


_MEMORY_MAX_ITERS = 3


async def router_stage(turn: RunTurn, *, is_last: bool = False) -> RouteDecision:
    """Decide the route and the worker's tools (a small model call, no events of its own
    beyond the step)."""
    await turn.step_start(Stage.ROUTER, turn.user_message.content)
    started = time.monotonic()
    usage_log = turn.usage_log(Stage.ROUTER)
    config = turn.config(Stage.ROUTER)
    try:
        decision = await router_decide(
            model=chat_model_for(settings.AGENT_ROUTER_MODEL, usage_log=usage_log),
            messages=conversation(
                turn.context(Visibility.ROUTER), turn.user_message.content, speaker="worker"
            ),
            tools=[*turn.worker_tools(), *await turn.worker_mcp_tools()],
            system_prompt=instructions(
                ROUTER_SYSTEM_PROMPT, context=config.context, memory_notes=turn.memory_notes
            ),
        )
    finally:
        turn.usage.keep(usage_log)
    raise_if_cancelled()
    await turn.step_finish(
        Stage.ROUTER,
        output=decision.model_dump(mode="json"),
        started=started,
        is_last=is_last,
        then=turn.step_after(Stage.ROUTER, input=turn.user_message.content),
        ahead=True,  # the worker's call does not wait for the boundary's statement
    )
    return decision


async def memory_stage(turn: RunTurn, output: AgentOutput) -> None:
    """Keep what later runs should know about the user (the last stage, where the run's
    agent has it). Best effort: the answer is delivered already, so a failure here is
    logged, not the run's."""
    run = turn.run
    await turn.step_start(Stage.MEMORY, output.answer)
    started = time.monotonic()
    state = turn.mapping_state(Stage.MEMORY)
    usage_log = turn.usage_log(Stage.MEMORY)
    config = turn.config(Stage.MEMORY)
    reply = memory_reply(
        model=chat_model_for(settings.AGENT_MEMORY_MODEL, usage_log=usage_log),
        turn=f"User: {turn.user_message.content}\n\nAssistant: {output.answer}",
        tools=memory_tools(turn.tool_context),
        system_prompt=instructions(
            MEMORY_SYSTEM_PROMPT, context=config.context, memory_notes=turn.memory_notes
        ),
        max_iters=_MEMORY_MAX_ITERS,
    )
    try:
        await turn.relay_reply(reply, state, usage_log)
    except RunNoLongerRunning:
        raise
    except Exception:
        logger.exception("memory stage of run %s failed; the run's answer stands", run.pk)
        for event in reasoning_end_events(state):
            turn.emitter.emit(event)
    finally:
        turn.usage.keep(usage_log)
    if state.tool_names or state.reasoning:
        await db_retried(
            run_stage_messages_store,
            run=run,
            claim_token=turn.claim_token,
            stage=Stage.MEMORY,
            tool_results=tool_results(state),
            answer=None,
            reasoning=reasoning_texts(state),
        )
    # What it kept or forgot, a line per tool call.
    kept = "\n".join(f"{tool.tool_name} {tool.args}" for tool in tool_results(state))
    turn.step_finish_with_run(Stage.MEMORY, output=kept, started=started, state=state)
