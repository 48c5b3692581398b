"""The worker stage: the agent answers with the routed tools, its answer streams as text
and is stored with the step's end (docs/spec/sse-events-and-usage.md, sections 3 and 8).

Only the worker imports this module (it imports AgentScope).
"""

import logging
import time
from typing import Any

from ag_ui.core import (
    BaseEvent,
    TextMessageEndEvent,
)
from agentscope.agent import Agent
from agentscope.message import (
    Msg,
)
from django.conf import settings
from django.db import connection, transaction
from pydantic import ValidationError

from agent_runs.models import Stage, Visibility, agent_step_id
from agent_runs.runtime.agents import (
    WORKER_SYSTEM_PROMPT,
    WorkerTools,
    conversation,
    instructions,
    worker_agent,
    worker_reply_of,
)
from agent_runs.runtime.agentscope_events import (
    RunMappingState,
    answer_text_events,
    reasoning_texts,
    tool_results,
)
from agent_runs.runtime.chat_models import UsageLog, chat_model_for
from agent_runs.runtime.held import held_answers, worker_hold
from agent_runs.runtime.host import db, db_retried
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.turn import RunTurn
from agent_runs.selectors.profiles import user_locale, user_profile_settings
from agent_runs.services.artifacts import ANSWER_FILE_NAME, agent_artifact_create
from agent_runs.services.messages import StageAnswer, run_stage_messages_store
from agent_runs.services.run_request import run_keeps_answer
from agent_runs.services.steps import (
    StepBegin,
    StepEnd,
    thread_lock_for_job,
)
from agent_runs.ui_schema import ui_schema_compile

logger = logging.getLogger(__name__)


_ROUTE_HINTS = {
    "answer": "Answer directly; no tools are needed for this message.",
    "clarify": "The request is ambiguous: ask the user one short clarifying question "
    "(result_type clarification).",
    "use_tools": "",
}


async def worker_stage(
    turn: RunTurn, decision: RouteDecision, *, is_last: bool = False
) -> AgentOutput | None:
    """Answer with the routed tools; store the tool results and the answer (and, where the
    run keeps it, the answer as a file artifact); send the answer as a text message whose
    end carries the structured output. ``None`` when the reply stopped on tool calls that
    wait for an answer from outside (``worker_hold``): the run ends there."""
    await turn.step_start(Stage.WORKER, turn.user_message.content)
    started = time.monotonic()
    state = turn.mapping_state(Stage.WORKER)
    usage_log = turn.usage_log(Stage.WORKER)
    agent = await _worker_agent(turn, decision, usage_log)
    final = await _worker_answer(turn, agent, state, usage_log)
    if state.held:
        await worker_hold(turn, agent, decision, state, started=started)
        return None
    if final is None:
        raise RuntimeError("the agent ended its reply without a final message")
    output = agent_output(final, state)
    for event in answer_text_events(output.answer, state):
        turn.emitter.emit(event)
    await _worker_end(turn, state, output, decision, started=started, is_last=is_last)
    return output


async def _worker_agent(turn: RunTurn, decision: RouteDecision, usage_log: UsageLog) -> Agent:
    """The worker's agent for this turn: its model, the routed tools, its instructions, and
    the state of the reply it goes on with (answering interrupts)."""
    config = turn.config(Stage.WORKER)
    tools = await _worker_toolset(turn, decision)
    context = "\n\n".join(part for part in (config.context, _ROUTE_HINTS[decision.route]) if part)
    return worker_agent(
        model=chat_model_for(
            settings.AGENT_WORKER_MODEL,
            usage_log=usage_log,
            thinking=settings.AGENT_WORKER_THINKING,
        ),
        tools=tools,
        system_prompt=instructions(
            WORKER_SYSTEM_PROMPT, context=context, memory_notes=turn.memory_notes
        ),
        max_iters=settings.AGENT_WORKER_MAX_ITERS,
        state=turn.held.agent_state if turn.held else None,
    )


async def _worker_answer(
    turn: RunTurn, agent: Agent, state: RunMappingState, usage_log: UsageLog
) -> Msg | None:
    """The worker's reply, relayed as it comes: to the user's message, or to the answers of
    the interrupts it was held on; its final message."""
    if turn.held is None:
        user_content = (
            await db(turn.user_content)
            if turn.user_message.content_blocks
            else turn.user_message.content
        )
        inputs: list[Any] = [conversation(turn.context(Visibility.WORKER), user_content)]
    else:
        inputs = held_answers(turn.held, state)
        turn.emitter.sequence.ended_earlier(item.tool_call_id for item in turn.held.answers)
    final = None
    try:
        for answer in inputs:
            final = await turn.relay_reply(worker_reply_of(agent, answer), state, usage_log)
    finally:
        turn.usage.keep(usage_log)
    return final


async def _worker_end(
    turn: RunTurn,
    state: RunMappingState,
    output: AgentOutput,
    decision: RouteDecision,
    *,
    started: float,
    is_last: bool,
) -> None:
    """Store the answer, end the worker's step (the next stage's begun) and write the
    answer's end and the steps' events, in one trip to a database thread (``_answer_store``),
    once its text is written and its usage recorded (the answer's end carries the run's
    usage so far)."""
    run = turn.run
    latency_ms = round((time.monotonic() - started) * 1000)
    answer = StageAnswer(
        message_id=state.message_id,
        content=output.answer,
        metadata={
            "run_id": run.run_id,
            "stage": Stage.WORKER,
            "latency_ms": latency_ms,
            "message_id": state.message_id,
            "route": decision.route,
            "agent_output": output.model_dump(mode="json"),
        },
    )
    if is_last:  # its step ends with the run
        turn.step_finish_with_run(Stage.WORKER, output=output.answer, started=started, state=state)
        ended = None
    else:
        ended = turn.step_end(
            Stage.WORKER, output=output.answer, started=started, is_last=False, state=state
        )
    then = turn.step_after(Stage.WORKER, input=output.answer)
    turn.usage.store_soon()  # recorded while its last text is written (``_answer_store`` waits)
    await turn.emitter.flush_async()  # its text comes first, and its usage is recorded
    await db_retried(_answer_store, turn, state, output, answer, ended, then)


def answer_end_event(
    output: AgentOutput, state: RunMappingState, *, digest: dict[str, Any], locale: str
) -> TextMessageEndEvent:
    """The worker's answer's end: its structured output, its UI schema in the owner's
    locale, and the run's usage so far (spec 3.4; the memory stage's come after)."""
    return TextMessageEndEvent(
        message_id=state.message_id,
        role="assistant",
        stage=Stage.WORKER,
        status=output.status,
        answer=output.answer,
        key_points=output.key_points,
        result_type=output.result_type,
        suggested_actions=[action.model_dump() for action in output.suggested_actions],
        error=None,
        ui_schema=ui_schema_compile(output.model_dump(mode="json"), locale=locale),
        **digest,
        threadId=state.thread_id,
        runId=state.run_id,
    )


def _answer_store(
    turn: RunTurn,
    state: RunMappingState,
    output: AgentOutput,
    answer: StageAnswer,
    ended: StepEnd | None,
    then: StepBegin | None,
) -> None:
    """In one trip to a database thread: the usage of the worker's model calls recorded
    (``RunUsage.store_kept``), then, in one transaction, store the worker's tool results and
    answer (and, where the run keeps it, the answer as a file artifact), end its step
    (``ended``; the next begun), and write the answer's end (the run's usage so far, the
    owner's locale) and the steps' events: a client that sees the answer's end finds the
    message stored."""
    run = turn.run
    turn.usage.store_kept()
    with turn.emitter.rewound_on_failure(), transaction.atomic():
        thread_lock_for_job(thread_id=run.thread_id)
        run_stage_messages_store(
            run=run,
            claim_token=turn.claim_token,
            stage=Stage.WORKER,
            tool_results=tool_results(state),
            answer=answer,
            reasoning=reasoning_texts(state),
        )
        if run_keeps_answer(run):
            agent_artifact_create(
                run=run,
                step_id=agent_step_id(
                    thread_id=run.thread_id, run_id=run.run_id, stage=Stage.WORKER
                ),
                file_name=ANSWER_FILE_NAME,
                content=answer.content.encode(),
                mime_type="text/markdown",
            )
        answer_end = answer_end_event(
            output,
            state,
            digest=turn.billing.run_usage_digest(
                run=run, any_records=turn.usage.recorded_calls > 0
            ),
            locale=user_locale(user_profile_settings(user_id=run.thread.owner_id)),
        )
        if ended is not None and then is not None and connection.vendor == "postgresql":
            # The steps and the events in one statement.
            turn.step_advance_journaled(ended, then, events_before=[answer_end])
            return
        events: list[BaseEvent] = [answer_end]
        if ended is not None:
            events += turn.step_advance(ended, then)
        turn.emitter.emit_here(events)


def agent_output(final: Msg, state: RunMappingState) -> AgentOutput:
    """The worker's structured output; a model that never gave one (it ran out of rounds)
    leaves its plain text as a partial answer."""
    structured = getattr(final, "structured_output", None)
    if structured:
        try:
            return AgentOutput.model_validate(structured)
        except ValidationError:
            logger.warning("the worker's structured output does not validate: %s", structured)
    text = state.narration.strip() or (final.get_text_content() or "").strip()
    return AgentOutput(answer=text, status="partial_success")


async def _worker_toolset(turn: RunTurn, decision: RouteDecision) -> WorkerTools:
    """The worker's tools for this turn: the backend and MCP tools the router chose (those
    that require approval marked), and the client's own tools."""
    config = turn.config(Stage.WORKER)
    backend = [tool for tool in turn.worker_tools() if tool.__name__ in decision.tools]
    approval = frozenset(
        tool.__name__
        for tool in backend
        if config.requires_approval(tool.__name__, runtime_mode=turn.run.runtime_mode)
    )
    served = [tool for tool in await turn.worker_mcp_tools() if tool.name in decision.tools]
    return WorkerTools(backend=backend, approval=approval, client=turn.client_tools(), mcp=served)
