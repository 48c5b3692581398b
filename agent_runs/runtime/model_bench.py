"""The worker's model path, timed in CPU without the database (``bench_model``,
docs/benchmarks.md): model calls to a loopback provider on one event loop, alone and as the
worker's reply relayed to AG-UI events and their wire JSON, as ``stages.RunTurn._relay``
does."""

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from agentscope.event import EventType
from agentscope.message import Msg
from django.conf import settings

from agent_runs.events.codec import encode_event
from agent_runs.runtime import agentscope_tuning
from agent_runs.runtime.agents import WORKER_SYSTEM_PROMPT, conversation, worker_reply
from agent_runs.runtime.agentscope_events import RunMappingState, map_agentscope_event
from agent_runs.runtime.chat_models import UsageLog, chat_model_for
from agent_runs.runtime.openai_compatible import provider_clients_close
from agent_runs.runtime.output import AgentOutput

_OUTPUT_TOOL = {
    "type": "function",
    "function": {
        "name": "GenerateStructuredOutput",
        "description": "Give the structured output.",
        "parameters": AgentOutput.model_json_schema(),
    },
}


@dataclass(frozen=True)
class PathFigures:
    """What ``calls`` calls of one path cost: process CPU in total, and what they carried."""

    calls: int
    cpu_seconds: float
    chunks: int  # the model's streamed chunks (ChatResponse deltas, usage carriers aside)
    events: int  # AG-UI events made (0 for the model alone)

    @property
    def ms_per_call(self) -> float:
        return self.cpu_seconds * 1000 / self.calls

    @property
    def us_per_chunk(self) -> float:
        return self.cpu_seconds * 1_000_000 / max(self.chunks, 1)


def model_path_bench(*, model_id: str, tokens: int, calls: int, warmup: int) -> list[PathFigures]:
    """Time ``calls`` model calls streaming a ``tokens``-token structured answer, alone and
    as the worker's reply, after ``warmup`` of each; all on one event loop."""
    agentscope_tuning.apply()  # as the worker does when it starts
    return asyncio.run(_bench(model_id, tokens, calls, warmup))


async def _bench(model_id: str, tokens: int, calls: int, warmup: int) -> list[PathFigures]:
    try:
        return await _bench_paths(model_id, tokens, calls, warmup)
    finally:
        await provider_clients_close()


async def _bench_paths(model_id: str, tokens: int, calls: int, warmup: int) -> list[PathFigures]:
    prompt = f"tokens={tokens}"
    figures = []
    for one_call in (_model_call, _worker_reply_call):
        for _ in range(warmup):
            await one_call(model_id, prompt)
        chunks = events = 0
        started = time.process_time()
        for _ in range(calls):
            got_chunks, got_events = await one_call(model_id, prompt)
            chunks, events = chunks + got_chunks, events + got_events
        figures.append(PathFigures(calls, time.process_time() - started, chunks, events))
    return figures


async def _model_call(model_id: str, prompt: str) -> tuple[int, int]:
    """One streamed call of the model alone, read to its end."""
    log = UsageLog(stage="bench")
    model = chat_model_for(model_id, usage_log=log)
    stream: Any = await model(conversation((), prompt), tools=[_OUTPUT_TOOL])
    chunks = 0
    async with contextlib.aclosing(stream):
        async for chunk in stream:
            chunks += not chunk.is_last
    _check_recorded(log)
    return chunks, 0


async def _worker_reply_call(model_id: str, prompt: str) -> tuple[int, int]:
    """One worker reply relayed to AG-UI events and their wire JSON."""
    log = UsageLog(stage="worker")
    state = RunMappingState(
        thread_id="bench-thread", run_id="bench-run", stage="worker", message_id="worker-bench"
    )
    reply = worker_reply(
        model=chat_model_for(model_id, usage_log=log),
        messages=conversation((), prompt),
        tools=(),
        system_prompt=WORKER_SYSTEM_PROMPT,
        max_iters=settings.AGENT_WORKER_MAX_ITERS,
    )
    chunks = events = 0
    final = None
    async with contextlib.aclosing(reply):  # type: ignore[type-var]  # an async generator
        async for item in reply:
            if isinstance(item, Msg):
                final = item
                continue
            chunks += getattr(item, "type", None) == EventType.TOOL_CALL_DELTA
            for event in map_agentscope_event(item, state):
                encode_event(event)
                events += 1
    if final is None or not getattr(final, "structured_output", None):
        raise RuntimeError("the worker's reply gave no structured output")
    _check_recorded(log)
    return chunks, events


def _check_recorded(log: UsageLog) -> None:
    if len(log.calls) != 1 or not log.calls[0].metadata:
        raise RuntimeError(f"expected one recorded call with its raw usage, got {log.calls}")
