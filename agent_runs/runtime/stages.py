"""The three stages of a run on the worker: each emits its STEP_STARTED/STEP_FINISHED and its
events, and stores what it produced (docs/spec/sse-events-and-usage.md, sections 3 and 8).

Only the worker imports this module (it imports AgentScope through the pipeline).
"""

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageEndEvent,
)
from agentscope.agent import Agent
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
)
from agentscope.message import (
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from agentscope.state import AgentState
from agentscope.tool import ToolBase
from django.conf import settings
from django.db import transaction
from pydantic import ValidationError

from agent_runs.agent_config import StageConfig, stage_config
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.codec import RUN_INTERRUPTED_EVENT
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.models import Interrupt, Message, Run, Stage, Visibility, agent_step_id
from agent_runs.runtime import tracing
from agent_runs.runtime.agents import (
    MEMORY_SYSTEM_PROMPT,
    ROUTER_SYSTEM_PROMPT,
    WORKER_SYSTEM_PROMPT,
    ClientTool,
    WorkerTools,
    conversation,
    instructions,
    mcp_tools,
    memory_reply,
    router_decide,
    user_content_with_images,
    worker_agent,
    worker_reply_of,
)
from agent_runs.runtime.agentscope_events import (
    RunMappingState,
    answer_text_events,
    map_agentscope_event,
    parse_tool_args,
    reasoning_end_events,
    reasoning_texts,
)
from agent_runs.runtime.chat_models import ModelCall, UsageLog, chat_model_for
from agent_runs.runtime.host import db, db_retried
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.tools.context import ToolContext
from agent_runs.runtime.tools.memory import memory_tools
from agent_runs.runtime.tools.registry import tools_for
from agent_runs.selectors.context import context_messages_for, run_user_message
from agent_runs.selectors.interrupts import (
    HeldReply,
    held_reply_for,
    interrupt_as_agui,
    thread_conversation,
)
from agent_runs.selectors.profiles import user_locale, user_profile_settings
from agent_runs.services.artifacts import ANSWER_FILE_NAME, agent_artifact_create
from agent_runs.services.interrupts import HeldCall, approval_schema, run_suspend
from agent_runs.services.messages import StageAnswer, ToolResult, run_stage_messages_store
from agent_runs.services.steps import (
    RunControl,
    StepBegin,
    StepEnd,
    agent_step_advance,
    agent_step_finish,
    agent_step_start,
)
from agent_runs.ui_schema import ui_schema_compile
from attachments.selectors import attachment_get_for_user, attachment_read
from billing import selectors as billing_selectors
from billing.budgets import Limits, budget_check, user_limits

logger = logging.getLogger(__name__)
T = TypeVar("T")

_ROUTE_HINTS = {
    "answer": "Answer directly; no tools are needed for this message.",
    "clarify": "The request is ambiguous: ask the user one short clarifying question "
    "(result_type clarification).",
    "use_tools": "",
}
_MEMORY_MAX_ITERS = 3
# How long a reply may keep the loop from the other runs and the journal writer: the longest
# an event waits, beyond its write, for a client to see it.
_TURN_SECONDS = 0.001


def raise_if_cancelled() -> None:
    """Go on unwinding a cancel that an await swallowed: AgentScope takes a cancelled reply
    for an interrupted one and ends it as if normally, while the job was stopped."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


@dataclass
class RunTurn:
    """What the stages of one run share."""

    run: Run
    emitter: RunEventEmitter
    user_message: Message
    memory_notes: str
    # Records a stage's model calls (with tracing on, under the trace context it is given);
    # gives how many it recorded.
    store_usage: Callable[[str, list[ModelCall], Any], int]
    recorded_calls: int = 0
    # Each stage's model calls, for its step's additional output.
    stage_calls: dict[str, list[ModelCall]] = field(default_factory=dict)
    # What the run's clients asked of it when this job last finished a stage (none yet).
    control: RunControl | None = None

    # The router's and the worker's context, read with the turn.
    contexts: dict[Visibility, list[tuple[str, str]]] = field(default_factory=dict)
    # Each stage's config, read with the turn; a config that could not be read (an
    # automation job's that does not validate) fails its stage when the stage starts.
    configs: dict[str, StageConfig | Exception] = field(default_factory=dict)
    # The reply the run goes on with, when it answers the interrupts of the run before.
    held: HeldReply | None = None
    # The owner's spending limits, read with the turn.
    limits: Limits = field(default_factory=lambda: Limits(daily=None, monthly=None))
    # The tools of the worker's MCP servers, listed when a stage first needs them.
    mcp_tools: list[ToolBase] | None = None
    # The stages the run goes through, in order.
    stages: list[Stage] = field(default_factory=list)
    # The stages whose step was started with the boundary before them (one trip to a
    # database thread for both): their start only sends ``STEP_STARTED``.
    steps_begun: set[str] = field(default_factory=set)
    # The last stage's step end, recorded in the transaction that completes the run.
    closing: StepEnd | None = None

    @classmethod
    def prepare(
        cls,
        *,
        run: Run,
        emitter: RunEventEmitter,
        memory_notes: str,
        store_usage: Callable[[str, list[ModelCall], Any], int],
    ) -> "RunTurn":
        """The turn of a run, with what its stages read (from a database thread)."""
        held = held_reply_for(run=run)
        user_message = run_user_message(run_pk=held.user_run_pk if held else run.pk)
        configs: dict[str, StageConfig | Exception] = {}
        for stage in (Stage.ROUTER, Stage.WORKER, Stage.MEMORY):
            try:
                configs[stage] = stage_config(run=run, stage=stage)
            except Exception as exc:  # raised when the stage that needs it starts
                configs[stage] = exc
        return cls(
            run=run,
            emitter=emitter,
            user_message=user_message,
            memory_notes=memory_notes,
            store_usage=store_usage,
            contexts=context_messages_for(
                thread_id=run.thread_id,
                before_seq=user_message.seq,
                consumers=[Visibility.ROUTER, Visibility.WORKER],
                token_budget=settings.AGENT_CONTEXT_TOKEN_BUDGET,
            ),
            configs=configs,
            held=held,
            limits=user_limits(user_id=run.thread.owner_id),
        )

    def config(self, stage: str) -> StageConfig:
        """The stage's config (what could not be read is raised now)."""
        config = self.configs[stage]
        if isinstance(config, Exception):
            raise config
        return config

    @property
    def claim_token(self) -> uuid.UUID:
        """The job's claim of the run (its emitter's): its writes count only under it."""
        token = self.emitter.claim_token
        assert token is not None, "a job's emitter writes under its claim"
        return token

    def usage_log(self, stage: Stage) -> UsageLog:
        """A stage's log of its model calls; with a budget, each billed call waits for the
        check that the owner's limits are not reached (``BudgetExceeded`` ends the run)."""
        if not self.limits.any:
            return UsageLog(stage=stage)
        return UsageLog(stage=stage, before_call=self._spend_check)

    async def _spend_check(self) -> None:
        # The calls before this one are recorded first (their records are written on a
        # database thread as each ends): the spend counts every call the run has made.
        await self.emitter.flush_async()
        await db(budget_check, user_id=self.run.thread.owner_id, limits=self.limits)

    def record_usage(self, usage_log: UsageLog) -> None:
        """Record the calls the log holds on a database thread (``defer``): the model does
        not wait for the bookkeeping. The emitter's ``flush_async()`` waits for it."""
        calls = usage_log.drain()
        self.stage_calls.setdefault(usage_log.stage, []).extend(calls)
        if calls:
            parent = tracing.current_context()  # the stage's span, with tracing on
            self.emitter.defer(partial(self._store_usage, usage_log.stage, calls, parent))

    def _store_usage(self, stage: str, calls: list[ModelCall], trace_parent: Any) -> None:
        self.recorded_calls += self.store_usage(stage, calls, trace_parent)

    @property
    def ids(self) -> dict[str, str]:
        return {"threadId": str(self.run.thread_id), "runId": self.run.run_id}

    async def step_start(self, stage: Stage, input: Any) -> None:
        """The stage starts: its step row, then its ``STEP_STARTED`` (unless the boundary
        before it did both)."""
        if stage in self.steps_begun:
            return
        await db_retried(
            agent_step_start, run=self.run, claim_token=self.claim_token, stage=stage, input=input
        )
        self.steps_begun.add(stage)
        self.emitter.emit(StepStartedEvent(step_name=stage, **self.ids))

    def step_begin(self, begin: StepBegin) -> StepStartedEvent:
        """Start a stage's step row (on a database thread); the ``STEP_STARTED`` the caller
        writes in the same transaction."""
        agent_step_start(
            run=self.run, claim_token=self.claim_token, stage=begin.stage, input=begin.input
        )
        self.steps_begun.add(begin.stage)
        return StepStartedEvent(step_name=begin.stage, **self.ids)

    def step_after(self, stage: Stage, *, input: Any) -> StepBegin | None:
        """The step of the stage after ``stage``, to start at the boundary (none after the
        last)."""
        index = self.stages.index(stage) + 1
        return (
            StepBegin(stage=self.stages[index], input=input) if index < len(self.stages) else None
        )

    def step_end(
        self,
        stage: Stage,
        *,
        output: Any,
        started: float,
        is_last: bool,
        state: RunMappingState | None,
    ) -> StepEnd:
        """How the stage's step ends: its output, with its tool calls, model calls and
        latency."""
        details: dict[str, Any] = {
            "latency_ms": round((time.monotonic() - started) * 1000),
            "model_calls": [
                {"model": call.model_id, **_token_counts(call.usage)}
                for call in self.stage_calls.get(stage, [])
            ],
        }
        if state is not None and state.tool_names:
            details["tool_calls"] = [
                {
                    "id": tool.tool_call_id,
                    "name": tool.tool_name,
                    "arguments": tool.args,
                    "result": tool.result,
                }
                for tool in _tool_results(state)
            ]
        return StepEnd(stage=stage, output=output, additional_output=details, is_last=is_last)

    async def step_finish(
        self,
        stage: Stage,
        *,
        output: Any,
        started: float,
        is_last: bool,
        state: RunMappingState | None = None,
        then: StepBegin | None = None,
    ) -> None:
        """The stage ends: its step row completed and, unless the run is to be parked at
        this boundary, the next stage's (``then``) started, with their ``STEP_FINISHED`` and
        ``STEP_STARTED`` written in the same transaction (one trip to a database thread,
        one commit)."""
        ended = self.step_end(stage, output=output, started=started, is_last=is_last, state=state)
        await self.emitter.flush_async()  # what the stage emitted comes first
        await db_retried(self._boundary, ended, then)

    def _boundary(self, ended: StepEnd, then: StepBegin | None) -> None:
        with self.emitter.rewound_on_failure(), transaction.atomic():
            self.emitter.emit_here(self.step_advance(ended, then))

    def step_advance(self, ended: StepEnd, then: StepBegin | None) -> list[BaseEvent]:
        """A stage boundary's rows (on a database thread, in the caller's transaction): the
        step ended and the next begun, and what the run's clients ask of it now; the events
        that say so, for the caller to write in the same transaction."""
        done = self.stages.index(Stage(ended.stage)) + 1 if ended.stage in self.stages else 0
        self.control, begun = agent_step_advance(
            run=self.run, claim_token=self.claim_token, ended=ended, done=done, then=then
        )
        events: list[BaseEvent] = [StepFinishedEvent(step_name=ended.stage, **self.ids)]
        if begun:
            assert then is not None
            self.steps_begun.add(then.stage)
            events.append(StepStartedEvent(step_name=then.stage, **self.ids))
        return events

    def step_finish_with_run(
        self, stage: Stage, *, output: Any, started: float, state: RunMappingState | None
    ) -> None:
        """The last stage ends: its step is completed, and its ``STEP_FINISHED`` sent, in
        the transaction that completes the run (``step_closing``)."""
        self.closing = self.step_end(
            stage, output=output, started=started, is_last=True, state=state
        )

    def step_closing(self) -> None:
        """The last stage's step end, in the transaction that completes the run (on its
        database thread), and its ``STEP_FINISHED``, written with the run's terminal event."""
        if self.closing is None:
            return
        ended = self.closing
        agent_step_finish(
            run=self.run,
            claim_token=self.claim_token,
            stage=ended.stage,
            output=ended.output,
            additional_output=ended.additional_output,
            is_last=True,
        )
        self.emitter.emit_with_end(StepFinishedEvent(step_name=ended.stage, **self.ids))

    @property
    def tool_context(self) -> ToolContext:
        return ToolContext(
            user_id=self.run.thread.owner_id, run_pk=self.run.pk, client_time=self.run.client_time
        )

    def worker_tools(self) -> list[Callable[..., Any]]:
        """The tools the worker's config enables (the router chooses among them)."""
        return tools_for(config=self.config(Stage.WORKER), context=self.tool_context)

    async def worker_mcp_tools(self) -> list[ToolBase]:
        """The tools of the worker's MCP servers (the router chooses among them too)."""
        if self.mcp_tools is None:
            self.mcp_tools = await mcp_tools(self.config(Stage.WORKER).mcp_servers)
        return self.mcp_tools

    async def worker_toolset(self, decision: RouteDecision) -> WorkerTools:
        """The worker's tools for this turn: the backend and MCP tools the router chose
        (those that require approval marked), and the client's own tools."""
        config = self.config(Stage.WORKER)
        backend = [tool for tool in self.worker_tools() if tool.__name__ in decision.tools]
        approval = frozenset(
            tool.__name__
            for tool in backend
            if config.requires_approval(tool.__name__, runtime_mode=self.run.runtime_mode)
        )
        served = [tool for tool in await self.worker_mcp_tools() if tool.name in decision.tools]
        return WorkerTools(
            backend=backend, approval=approval, client=self.client_tools(), mcp=served
        )

    def client_tools(self) -> list[ClientTool]:
        """The client's tools (``RunAgentInput.tools``): those of the run it goes on from,
        as the client now names them."""
        specs = {tool["name"]: tool for tool in self.held.client_tools} if self.held else {}
        specs.update({tool["name"]: tool for tool in self.run.input.get("tools", [])})
        return [
            ClientTool(
                name=name,
                description=spec.get("description", ""),
                parameters=spec.get("parameters") or None,
            )
            for name, spec in specs.items()
        ]

    def user_content(self) -> str | list[TextBlock | DataBlock]:
        """The user message for the worker: its text, with its images when it has some
        (from a database thread)."""
        images = [
            (block["mimeType"], attachment_bytes(owner=self.run.thread.owner, block=block))
            for block in self.user_message.content_blocks
            if block.get("type") == "binary"
        ]
        if not images:
            return self.user_message.content
        return user_content_with_images(self.user_message.content, images)

    def context(self, consumer: Visibility) -> list[tuple[str, str]]:
        return self.contexts[consumer]

    async def relay_reply(
        self, reply: AsyncIterator[Any], state: RunMappingState, usage_log: UsageLog
    ) -> Msg | None:
        """Send a stage's AgentScope events as AG-UI events; its final message. The journal
        writer writes the events as they come, and each model call's usage is recorded once
        the call ends: the reply runs through in one pass."""
        final = await self._relay(reply, state, usage_log)
        raise_if_cancelled()
        return final

    async def _relay(
        self, reply: AsyncIterator[Any], state: RunMappingState, usage_log: UsageLog
    ) -> Msg | None:
        final = None
        turned = time.monotonic()
        async with contextlib.aclosing(reply):  # type: ignore[type-var]  # an async generator
            async for item in reply:
                if isinstance(item, Msg):
                    final = item
                    continue
                for event in map_agentscope_event(item, state):
                    self.emitter.emit(event)
                if usage_log.calls:
                    self.record_usage(usage_log)
                if time.monotonic() - turned >= _TURN_SECONDS:
                    # A fast model's chunks are read from a buffer without a turn of the
                    # loop: now and then give the other runs and the journal writer their
                    # turn; what comes meanwhile goes in the next write.
                    await asyncio.sleep(0)
                    turned = time.monotonic()
        return final


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
        turn.record_usage(usage_log)
    raise_if_cancelled()
    await turn.step_finish(
        Stage.ROUTER,
        output=decision.model_dump(mode="json"),
        started=started,
        is_last=is_last,
        then=turn.step_after(Stage.ROUTER, input=turn.user_message.content),
    )
    return decision


async def worker_stage(
    turn: RunTurn, decision: RouteDecision, *, is_last: bool = False
) -> AgentOutput | None:
    """Answer with the routed tools; store the tool results and the answer (and, where the
    run keeps it, the answer as a file artifact); send the answer as a text message whose
    end carries the structured output. ``None`` when the reply stopped on tool calls that
    wait for an answer from outside (``_worker_hold``): the run ends there."""
    run = turn.run
    await turn.step_start(Stage.WORKER, turn.user_message.content)
    started = time.monotonic()
    state = RunMappingState(
        thread_id=str(run.thread_id),
        run_id=run.run_id,
        stage=Stage.WORKER,
        message_id=f"{Stage.WORKER.value}-{run.run_id}",
    )
    usage_log = turn.usage_log(Stage.WORKER)
    agent = await _worker_agent(turn, decision, usage_log)
    final = await _worker_answer(turn, agent, state, usage_log)
    if state.held:
        await _worker_hold(turn, agent, decision, state, started=started)
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
    tools = await turn.worker_toolset(decision)
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
        turn.record_usage(usage_log)
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


def held_answers(held: HeldReply, state: RunMappingState) -> list[Any]:
    """What the held reply is given to go on: the approvals' answers, then the client's
    tool results (AgentScope takes one kind at a time). The calls' names and arguments,
    sent by the run before, are the mapping's, so their results name them; a client tool's
    result is not sent again (the client has it)."""
    confirms: list[ConfirmResult] = []
    results: list[ToolResultBlock] = []
    for interrupt in held.answers:
        state.tool_names[interrupt.tool_call_id] = interrupt.tool_name
        state.tool_args[interrupt.tool_call_id] = json.dumps(interrupt.arguments)
        answer = interrupt.answer or {}
        if interrupt.kind == Interrupt.Kind.APPROVAL:
            payload = answer.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            approved = interrupt.status == Interrupt.Status.RESOLVED and bool(
                payload.get("approved")
            )
            arguments = payload.get("arguments", interrupt.arguments) if approved else {}
            if approved:
                state.tool_args[interrupt.tool_call_id] = json.dumps(arguments)
            else:
                reason = payload.get("reason")
                state.declined[interrupt.tool_call_id] = "The user declined this call" + (
                    f": {reason}" if isinstance(reason, str) and reason else "."
                )
            call = ToolCallBlock(
                id=interrupt.tool_call_id, name=interrupt.tool_name, input=json.dumps(arguments)
            )
            confirms.append(ConfirmResult(confirmed=approved, tool_call=call))
            continue
        state.quiet_results.add(interrupt.tool_call_id)
        results.append(_client_tool_result(interrupt, answer))
    reply_id = AgentState.model_validate(held.agent_state).reply_id
    inputs: list[Any] = []
    if confirms:
        inputs.append(UserConfirmResultEvent(reply_id=reply_id, confirm_results=confirms))
    if results:
        inputs.append(ExternalExecutionResultEvent(reply_id=reply_id, execution_results=results))
    return inputs


def _client_tool_result(interrupt: Interrupt, answer: dict[str, Any]) -> ToolResultBlock:
    """A client tool's result as AgentScope takes it: what the client sent (its tool
    message's content, or a resume's payload), an error when it said so."""
    if interrupt.status != Interrupt.Status.RESOLVED:
        output, failed = "The user cancelled this tool call.", True
    elif "result" in answer:
        output, failed = str(answer["result"]), bool(answer.get("error"))
        if failed:
            output = f"{output}\n{answer['error']}".strip()
    else:
        payload = answer.get("payload")
        output, failed = payload if isinstance(payload, str) else json.dumps(payload), False
    return ToolResultBlock(
        id=interrupt.tool_call_id,
        name=interrupt.tool_name,
        output=output,
        state=ToolResultState.ERROR if failed else ToolResultState.SUCCESS,
    )


async def _worker_hold(
    turn: RunTurn,
    agent: Agent,
    decision: RouteDecision,
    state: RunMappingState,
    *,
    started: float,
) -> None:
    """The reply stopped on tool calls waiting for an answer: keep it (the agent's state)
    with an interrupt per call and the results of the calls that ran, end the step, and
    send the conversation so far and what the run waits for (``CUSTOM run_interrupted``,
    before the run's end)."""
    held = []
    for tool_call_id, kind in state.held.items():
        name = state.tool_names.get(tool_call_id, "")
        tool = await agent.toolkit.get_tool(name)
        schema = getattr(tool, "input_schema", None) or {"type": "object"}
        approval = kind == Interrupt.Kind.APPROVAL
        held.append(
            HeldCall(
                kind=Interrupt.Kind(kind),
                tool_call_id=tool_call_id,
                tool_name=name,
                arguments=parse_tool_args(state.tool_args.get(tool_call_id, "")),
                message=f"Allow {name} to run with these arguments?" if approval else "",
                response_schema=approval_schema(schema) if approval else None,
            )
        )
    reply = {
        "agent_state": agent.state.model_dump(mode="json"),
        "decision": decision.model_dump(mode="json"),
        "client_tools": [
            {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
            for tool in turn.client_tools()
        ],
        "user_run_pk": turn.held.user_run_pk if turn.held else turn.run.pk,
    }
    interrupts, messages = await db_retried(_hold_store, turn, state, reply, held)
    turn.emitter.emit(MessagesSnapshotEvent.model_validate({"messages": messages, **turn.ids}))
    await turn.step_finish(Stage.WORKER, output="", started=started, is_last=True, state=state)
    approvals = [item for item in interrupts if item.kind == Interrupt.Kind.APPROVAL]
    turn.emitter.emit(
        CustomEvent(
            name=RUN_INTERRUPTED_EVENT,
            value={
                "interrupts": [interrupt_as_agui(item) for item in approvals],
                "pendingToolCallIds": [
                    item.tool_call_id
                    for item in interrupts
                    if item.kind == Interrupt.Kind.CLIENT_TOOL
                ],
            },
        )
    )


def _hold_store(
    turn: RunTurn, state: RunMappingState, reply: dict[str, Any], held: list[HeldCall]
) -> tuple[list[Interrupt], list[dict[str, Any]]]:
    """Store the results of the calls that ran (and the reasoning before the calls), then
    the held reply and its interrupts; the thread's conversation with the held calls, as
    AG-UI messages."""
    run = turn.run
    ran = [tool for tool in _tool_results(state) if tool.tool_call_id not in state.held]
    reasoning = reasoning_texts(state)
    if ran or reasoning:
        run_stage_messages_store(
            run=run,
            claim_token=turn.claim_token,
            stage=Stage.WORKER,
            tool_results=ran,
            answer=None,
            reasoning=reasoning,
        )
    interrupts = run_suspend(run=run, claim_token=turn.claim_token, reply=reply, held=held)
    messages = thread_conversation(thread_id=run.thread_id)
    calls = [
        {
            "id": call.tool_call_id,
            "type": "function",
            "function": {"name": call.tool_name, "arguments": json.dumps(call.arguments)},
        }
        for call in held
    ]
    message_id = f"{Stage.WORKER.value}-{run.run_id}"
    assistant = next((item for item in messages if item["id"] == message_id), None)
    if assistant is None:
        assistant = {"id": message_id, "role": "assistant", "toolCalls": []}
        messages.append(assistant)
    assistant["toolCalls"].extend(calls)
    for message in messages:
        if message.get("toolCalls") == []:
            del message["toolCalls"]
    return interrupts, messages


def _answer_store(
    turn: RunTurn,
    state: RunMappingState,
    output: AgentOutput,
    answer: StageAnswer,
    ended: StepEnd | None,
    then: StepBegin | None,
) -> None:
    """In one transaction (one trip to a database thread, one commit): store the worker's
    tool results and answer (and, where the run keeps it, the answer as a file artifact),
    end its step (``ended``; the next begun), and write the answer's end (the run's usage
    so far, the owner's locale) and the steps' events: a client that sees the answer's end
    finds the message stored."""
    run = turn.run
    with turn.emitter.rewound_on_failure(), transaction.atomic():
        run_stage_messages_store(
            run=run,
            claim_token=turn.claim_token,
            stage=Stage.WORKER,
            tool_results=_tool_results(state),
            answer=answer,
            reasoning=reasoning_texts(state),
        )
        if run.answer_artifact:
            agent_artifact_create(
                run=run,
                step_id=agent_step_id(
                    thread_id=run.thread_id, run_id=run.run_id, stage=Stage.WORKER
                ),
                file_name=ANSWER_FILE_NAME,
                content=answer.content.encode(),
                mime_type="text/markdown",
            )
        events: list[BaseEvent] = [
            answer_end_event(
                output,
                state,
                digest=billing_selectors.run_usage_digest(
                    run=run, any_records=turn.recorded_calls > 0
                ),
                locale=user_locale(user_profile_settings(user_id=run.thread.owner_id)),
            )
        ]
        if ended is not None:
            events += turn.step_advance(ended, then)
        turn.emitter.emit_here(events)


async def memory_stage(turn: RunTurn, output: AgentOutput) -> None:
    """Keep what later runs should know about the user (the last stage, where the run's
    agent has it). Best effort: the answer is delivered already, so a failure here is
    logged, not the run's."""
    run = turn.run
    await turn.step_start(Stage.MEMORY, output.answer)
    started = time.monotonic()
    state = RunMappingState(
        thread_id=str(run.thread_id),
        run_id=run.run_id,
        stage=Stage.MEMORY,
        message_id=f"{Stage.MEMORY.value}-{run.run_id}",
    )
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
        turn.record_usage(usage_log)
    if state.tool_names or state.reasoning:
        await db_retried(
            run_stage_messages_store,
            run=run,
            claim_token=turn.claim_token,
            stage=Stage.MEMORY,
            tool_results=_tool_results(state),
            answer=None,
            reasoning=reasoning_texts(state),
        )
    # What it kept or forgot, a line per tool call.
    kept = "\n".join(f"{tool.tool_name} {tool.args}" for tool in _tool_results(state))
    turn.step_finish_with_run(Stage.MEMORY, output=kept, started=started, state=state)


def attachment_bytes(*, owner: Any, block: dict[str, Any]) -> bytes:
    """The stored image a user message's binary block names (its ``bucket`` and ``path``)."""
    attachment = attachment_get_for_user(user=owner, bucket=block["bucket"], path=block["path"])
    return attachment_read(attachment=attachment)


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


def _token_counts(usage: dict[str, Any]) -> dict[str, Any]:
    return {key: usage[key] for key in ("input_tokens", "output_tokens") if key in usage}


def _tool_results(state: RunMappingState) -> list[ToolResult]:
    return [
        ToolResult(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            args=state.tool_args.get(tool_call_id, ""),
            result=state.tool_results.get(tool_call_id, ""),
        )
        for tool_call_id, tool_name in state.tool_names.items()
    ]
