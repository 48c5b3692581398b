"""The agent run on AgentScope: one worker agent answering the run's user message."""

import time
from dataclasses import dataclass

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import UserMsg

from agent_runs.demo_model import DemoChatModel

WORKER_SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's message clearly."


@dataclass(frozen=True)
class PipelineAnswer:
    text: str
    latency_ms: int


async def pipeline_answer(*, user_text: str) -> PipelineAnswer:
    started = time.monotonic()
    agent = Agent(
        name="worker",
        system_prompt=WORKER_SYSTEM_PROMPT,
        model=DemoChatModel(),
        # Without this AgentScope appends a runtime-state hint block to every prompt.
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    reply = await agent.reply(UserMsg(name="user", content=user_text))
    return PipelineAnswer(
        text=reply.get_text_content() or "",
        latency_ms=round((time.monotonic() - started) * 1000),
    )
