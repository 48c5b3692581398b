"""What the stages of one run share on the worker (``RunTurn``): the run, its emitter, what
its stages read at its start, its steps and its model calls' usage.

Only the worker imports this module (it imports AgentScope).
"""

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    StepFinishedEvent,
    StepStartedEvent,
)
from agentscope.message import (
    DataBlock,
    Msg,
    TextBlock,
)
from agentscope.tool import ToolBase
from django.conf import settings
from django.db import connection, transaction

from agent_runs import ports
from agent_runs.agent_config import StageConfig, stage_config
from agent_runs.errors import RunNoLongerRunning
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.store import HeldEvents
from agent_runs.models import Message, Run, Stage, Visibility
from agent_runs.runtime.agents import (
    ClientTool,
    mcp_tools,
    user_content_with_images,
)
from agent_runs.runtime.agentscope_events import (
    RunMappingState,
    map_agentscope_event,
    tool_results,
)
from agent_runs.runtime.chat_models import UsageLog
from agent_runs.runtime.host import db, db_retried, raise_if_cancelled
from agent_runs.runtime.tools.context import ToolContext
from agent_runs.runtime.tools.registry import tools_for
from agent_runs.runtime.usage import RunUsage
from agent_runs.selectors.context import turn_reads
from agent_runs.selectors.interrupts import (
    HeldReply,
    held_reply_for,
)
from agent_runs.services.lifecycle import run_complete_journaled
from agent_runs.services.run_request import run_step_budget
from agent_runs.services.steps import (
    RunControl,
    StepBegin,
    StepEnd,
    agent_step_advance,
    agent_step_advance_journaled,
    agent_step_finish,
    agent_step_start,
    agent_step_start_journaled,
    thread_lock_for_job,
)
from agent_runs.usage import Limits

logger = logging.getLogger(__name__)


# How long a reply may keep the loop from the other runs and the journal writer: the longest
# an event waits, beyond its write, for a client to see it.
_TURN_SECONDS = 0.001


@dataclass
class RunTurn:
    """What the stages of one run share."""

    run: Run
    emitter: RunEventEmitter
    user_message: Message
    memory_notes: str
    # The job's model calls, and what of their usage is to be recorded.
    usage: RunUsage
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
    # What the turn asks of billing (its usage, its budget), resolved once.
    billing: ports.Billing = field(default_factory=ports.billing)
    # The tools of the worker's MCP servers, listed when a stage first needs them.
    mcp_tools: list[ToolBase] | None = None
    # The stages the run goes through, in order.
    stages: list[Stage] = field(default_factory=list)
    # The stages whose step was started with the boundary before them (one trip to a
    # database thread for both): their start only sends ``STEP_STARTED``.
    steps_begun: set[str] = field(default_factory=set)
    # The last stage's step end, recorded in the transaction that completes the run.
    closing: StepEnd | None = None
    # Whether the job has passed the thread's turn on (as the run completed).
    passed_on: bool = False
    # The statement of a boundary the next stage does not wait for (``step_finish``'s
    # ``ahead``): whether it started that stage's step.
    boundary: "asyncio.Future[bool] | None" = None

    @classmethod
    def prepare(cls, *, run: Run, emitter: RunEventEmitter) -> "RunTurn":
        """The turn of a run, with what its stages read (from a database thread)."""
        held = held_reply_for(run=run)
        billing = ports.billing()
        reads = turn_reads(
            user_run_pk=held.user_run_pk if held else run.pk,
            thread_id=run.thread_id,
            user_id=run.thread.owner_id,
            memory_limit=settings.AGENT_MEMORY_MAX_ITEMS,
            consumers=[Visibility.ROUTER, Visibility.WORKER],
            token_budget=settings.AGENT_CONTEXT_TOKEN_BUDGET,
        )
        configs: dict[str, StageConfig | Exception] = {}
        for stage in (Stage.ROUTER, Stage.WORKER, Stage.MEMORY):
            try:
                configs[stage] = stage_config(run=run, stage=stage)
            except Exception as exc:  # raised when the stage that needs it starts
                configs[stage] = exc
        return cls(
            run=run,
            emitter=emitter,
            user_message=reads.user_message,
            memory_notes=reads.memory_notes,
            usage=RunUsage(run=run),
            contexts=reads.contexts,
            configs=configs,
            held=held,
            limits=billing.user_limits(user_id=run.thread.owner_id),
            billing=billing,
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
        # The calls before this one are recorded first: the spend counts every call the run
        # has made.
        await db(self._spend_check_here)

    def _spend_check_here(self) -> None:
        self.usage.store_kept()
        self.billing.budget_check(user_id=self.run.thread.owner_id, limits=self.limits)

    def mapping_state(self, stage: Stage) -> RunMappingState:
        """How a stage's AgentScope events become AG-UI events: its text is the message
        ``<stage>-<runId>``."""
        run = self.run
        return RunMappingState(
            thread_id=str(run.thread_id),
            run_id=run.run_id,
            stage=stage,
            message_id=f"{stage.value}-{run.run_id}",
        )

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

    def step_begin_journaled(self, begin: StepBegin, *, events_before: list[BaseEvent]) -> None:
        """``step_begin`` with its ``STEP_STARTED`` and ``events_before`` (the run's start)
        written in the same statement (PostgreSQL, in the caller's transaction)."""
        held = self.emitter.hold_here(
            [*events_before, StepStartedEvent(step_name=begin.stage, **self.ids)]
        )
        ids = agent_step_start_journaled(
            run=self.run,
            claim_token=self.claim_token,
            stage=begin.stage,
            input=begin.input,
            events=held,
        )
        self.emitter.held_written(held, ids)
        self.steps_begun.add(begin.stage)

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
                {"model": call.model_id, **token_counts(call.usage)}
                for call in self.usage.stage_calls.get(stage, [])
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
                for tool in tool_results(state)
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
        ahead: bool = False,
    ) -> None:
        """The stage ends: its step row completed and, unless the run is to be parked at
        this boundary, the next stage's (``then``) started, with their ``STEP_FINISHED`` and
        ``STEP_STARTED`` written in the same transaction (one trip to a database thread,
        one commit).

        ``ahead``: the next stage need not wait for that statement, where it can go ahead
        (``goes_ahead``): it is left in flight (``_boundary_ahead``)."""
        ended = self.step_end(stage, output=output, started=started, is_last=is_last, state=state)
        await self.emitter.flush_async()  # what the stage emitted comes first
        if ahead and self.goes_ahead(then):
            assert then is not None
            self._boundary_ahead(ended, then)
        else:
            await db_retried(self._boundary, ended, then)
        # The stage's calls are recorded beside the next stage's call, once its first
        # events are out (``_relay``) or in a moment: not on the way to its first token.
        self.usage.store_later()

    def _boundary(self, ended: StepEnd, then: StepBegin | None) -> None:
        if then is None or connection.vendor != "postgresql":
            with self.emitter.rewound_on_failure(), transaction.atomic():
                thread_lock_for_job(thread_id=self.run.thread_id)
                self.emitter.emit_here(self.step_advance(ended, then))
            return
        # On PostgreSQL the thread's lock, the steps and their events in one statement
        # (``agent_step_advance_journaled``), where a transaction took five round trips.
        with self.emitter.rewound_on_failure():
            self.step_advance_journaled(ended, then, events_before=[])

    def goes_ahead(self, then: StepBegin | None) -> bool:
        """Whether the stage after a boundary starts before the boundary's statement is
        done (``_boundary_ahead``): on PostgreSQL, for a run with no step budget (which may
        be parked there by design)."""
        return (
            then is not None
            and connection.vendor == "postgresql"
            and run_step_budget(self.run) is None
        )

    def _boundary_ahead(self, ended: StepEnd, then: StepBegin) -> None:
        """Leave the boundary's statement in flight (``boundary``) for the next stage to
        start at once: its events held ahead on the emitter, the statement
        (``agent_step_advance_journaled``) on a database thread. The next stage is run by
        ``_stage_ahead`` (execution.py), which settles it (``boundary_settled``)."""
        held = self.emitter.hold_ahead(
            [
                StepFinishedEvent(step_name=ended.stage, **self.ids),
                StepStartedEvent(step_name=then.stage, **self.ids),
            ],
            last_optional=True,
        )
        self.steps_begun.add(then.stage)
        self.boundary = asyncio.ensure_future(db_retried(self._boundary_write, ended, then, held))

    def _boundary_write(self, ended: StepEnd, then: StepBegin, held: HeldEvents) -> bool:
        begun, ids = self._advance_written(ended, then, held)
        self.emitter.ahead_written(held, ids)
        return begun

    def _advance_written(
        self, ended: StepEnd, then: StepBegin, held: HeldEvents
    ) -> tuple[bool, list[int]]:
        """``agent_step_advance_journaled`` with the boundary's held events: whether the
        next step was started, and the ids of the events written."""
        self.control, begun, ids = agent_step_advance_journaled(
            run=self.run,
            claim_token=self.claim_token,
            ended=ended,
            done=self._stages_done(ended),
            then=then,
            events=held,
        )
        return begun, ids

    def boundary_settled(self, stage: Stage, *, failed: bool = False) -> bool:
        """On the loop, once the boundary left in flight has ended (``_boundary_ahead``;
        ``failed``: with an error) and, unless it started ``stage``'s step, that stage has
        stopped: whether it did. What the stage emitted meanwhile is written next if so,
        else dropped."""
        self.boundary = None
        begun = self.emitter.ahead_settled(failed=failed)
        if not begun:
            self.steps_begun.discard(stage)
        return begun

    def step_advance_journaled(
        self, ended: StepEnd, then: StepBegin, *, events_before: list[BaseEvent]
    ) -> None:
        """``step_advance`` and its events, ``events_before`` first, written in the same
        statement (PostgreSQL; on its own, or in the caller's transaction)."""
        held = self.emitter.hold_here(
            [
                *events_before,
                StepFinishedEvent(step_name=ended.stage, **self.ids),
                StepStartedEvent(step_name=then.stage, **self.ids),
            ],
            last_optional=True,
        )
        begun, ids = self._advance_written(ended, then, held)
        self.emitter.held_written(held, ids)
        if begun:
            self.steps_begun.add(then.stage)

    def _stages_done(self, ended: StepEnd) -> int:
        """How many of the run's stages are done once ``ended`` is."""
        return self.stages.index(Stage(ended.stage)) + 1 if ended.stage in self.stages else 0

    def step_advance(self, ended: StepEnd, then: StepBegin | None) -> list[BaseEvent]:
        """A stage boundary's rows (on a database thread, in the caller's transaction): the
        step ended and the next begun, and what the run's clients ask of it now; the events
        that say so, for the caller to write in the same transaction."""
        self.control, begun = agent_step_advance(
            run=self.run,
            claim_token=self.claim_token,
            ended=ended,
            done=self._stages_done(ended),
            then=then,
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

    def run_end_journaled(self) -> None:
        """The run completed (on PostgreSQL, in the caller's transaction): the thread's
        lock, the last stage's step end, its ``STEP_FINISHED`` and the run's
        ``RUN_FINISHED``, and the run marked completed, in one statement
        (``run_complete_journaled``); ``RunNoLongerRunning`` when it is no longer the
        job's."""
        ended = self.closing
        events: list[BaseEvent] = []
        if ended is not None:
            events.append(StepFinishedEvent(step_name=ended.stage, **self.ids))
        events.append(RunFinishedEvent(thread_id=str(self.run.thread_id), run_id=self.run.run_id))
        held = self.emitter.hold_here(events, ending=True)
        ids = run_complete_journaled(
            run=self.run, claim_token=self.claim_token, closing=ended, events=held
        )
        if ids is None:
            raise RunNoLongerRunning(self.run.pk)
        self.emitter.held_written(held, ids)

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
        first_out = False  # whether the reply's first events are written
        async with contextlib.aclosing(reply):  # type: ignore[type-var]  # an async generator
            async for item in reply:
                if isinstance(item, Msg):
                    final = item
                    continue
                events = map_agentscope_event(item, state)
                for event in events:
                    self.emitter.emit(event)
                if usage_log.calls:
                    self.usage.keep(usage_log)
                if events and not first_out:
                    # The reply's first events (what its reader waits for: its first token)
                    # are written and on their stream before the next chunk is read: their
                    # write goes on alone, where reading a fast model's buffered chunks
                    # meanwhile held each of its steps (the statement, the stream entry)
                    # back by a chunk's work (3.5 ms of a 100-token reply's first token).
                    await self.emitter.flush_async()
                    first_out = True
                    # The calls kept so far (the router's) are recorded beside the rest
                    # of the reply.
                    self.usage.store_soon()
                    turned = time.monotonic()
                elif time.monotonic() - turned >= _TURN_SECONDS:
                    # A fast model's chunks are read from a buffer without a turn of the
                    # loop: now and then give the other runs and the journal writer their
                    # turn; what comes meanwhile goes in the next write.
                    await asyncio.sleep(0)
                    turned = time.monotonic()
        return final


def attachment_bytes(*, owner: Any, block: dict[str, Any]) -> bytes:
    """The stored image a user message's binary block names (its ``bucket`` and ``path``)."""
    return ports.attachments().image_read(user=owner, bucket=block["bucket"], path=block["path"])


def token_counts(usage: dict[str, Any]) -> dict[str, Any]:
    return {key: usage[key] for key in ("input_tokens", "output_tokens") if key in usage}
