"""A worker reply held on tool calls that wait for an answer from outside (approvals, the
client's tools): kept with its interrupts, and given their answers when a later run goes on
with it.

Only the worker imports this module (it imports AgentScope).
"""

import json
import logging
from typing import Any

from ag_ui.core import (
    CustomEvent,
    MessagesSnapshotEvent,
)
from agentscope.agent import Agent
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
)
from agentscope.message import (
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from agentscope.state import AgentState

from agent_runs.events.codec import RUN_INTERRUPTED_EVENT
from agent_runs.models import Interrupt, Stage
from agent_runs.runtime.agentscope_events import (
    RunMappingState,
    parse_tool_args,
    reasoning_texts,
    tool_results,
)
from agent_runs.runtime.host import db_retried
from agent_runs.runtime.output import RouteDecision
from agent_runs.runtime.turn import RunTurn
from agent_runs.selectors.interrupts import (
    HeldReply,
    interrupt_as_agui,
    thread_conversation,
)
from agent_runs.services.interrupts import HeldCall, approval_schema, run_suspend
from agent_runs.services.messages import run_stage_messages_store

logger = logging.getLogger(__name__)


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


async def worker_hold(
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
    held = [
        await _held_call(agent, state, tool_call_id, kind)
        for tool_call_id, kind in state.held.items()
    ]
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
    turn.emitter.emit(_interrupted_event(interrupts))


async def _held_call(
    agent: Agent, state: RunMappingState, tool_call_id: str, kind: str
) -> HeldCall:
    """A call the reply waits on: an approval (with the schema of its answer) or a client
    tool's call."""
    name = state.tool_names.get(tool_call_id, "")
    tool = await agent.toolkit.get_tool(name)
    schema = getattr(tool, "input_schema", None) or {"type": "object"}
    approval = kind == Interrupt.Kind.APPROVAL
    return HeldCall(
        kind=Interrupt.Kind(kind),
        tool_call_id=tool_call_id,
        tool_name=name,
        arguments=parse_tool_args(state.tool_args.get(tool_call_id, "")),
        message=f"Allow {name} to run with these arguments?" if approval else "",
        response_schema=approval_schema(schema) if approval else None,
    )


def _interrupted_event(interrupts: list[Interrupt]) -> CustomEvent:
    """``CUSTOM run_interrupted``: the approvals the run waits on, and the client tools'
    calls whose results it waits for."""
    approvals = [item for item in interrupts if item.kind == Interrupt.Kind.APPROVAL]
    return CustomEvent(
        name=RUN_INTERRUPTED_EVENT,
        value={
            "interrupts": [interrupt_as_agui(item) for item in approvals],
            "pendingToolCallIds": [
                item.tool_call_id for item in interrupts if item.kind == Interrupt.Kind.CLIENT_TOOL
            ],
        },
    )


def _hold_store(
    turn: RunTurn, state: RunMappingState, reply: dict[str, Any], held: list[HeldCall]
) -> tuple[list[Interrupt], list[dict[str, Any]]]:
    """Store the results of the calls that ran (and the reasoning before the calls), then
    the held reply and its interrupts; the thread's conversation with the held calls, as
    AG-UI messages."""
    run = turn.run
    ran = [tool for tool in tool_results(state) if tool.tool_call_id not in state.held]
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
