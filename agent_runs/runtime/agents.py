"""The agents of a run's stages on AgentScope (docs/architecture.md): the router decides how
the turn is handled and with which tools, the worker answers with a structured output
(``AgentOutput``), and the memory stage keeps what the user's later runs should know."""

import base64
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, TypeVar

from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
from agentscope.agent._config import SummarySchema
from agentscope.event import ExternalExecutionResultEvent, UserConfirmResultEvent
from agentscope.exception import StructuredOutputError
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    Msg,
    SystemMsg,
    TextBlock,
    UserMsg,
)
from agentscope.model import ChatModelBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, ToolBase, Toolkit
from pydantic import ValidationError

from agent_runs.agent_config import McpServer
from agent_runs.models import Stage
from agent_runs.runtime import tracing
from agent_runs.runtime.output import AgentOutput, RouteDecision
from agent_runs.runtime.tools.mcp_tools import mcp_tools_for

logger = logging.getLogger(__name__)


WORKER_SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools you have when the request needs them, then "
    "finish by giving your reply as the structured output: the answer for the user, the key "
    "points it rests on, its result type and status, and next steps the user may want."
)
ROUTER_SYSTEM_PROMPT = (
    "You are the router of an assistant. Read the conversation and the user's latest "
    "message, and decide how the assistant should handle it: answer directly, use tools, "
    "or ask the user one clarifying question when the request is ambiguous. When tools are "
    "needed, name only the ones it needs."
)
MEMORY_SYSTEM_PROMPT = (
    "You keep the long-term memory of an assistant about its user. From the turn below, "
    "remember durable facts and preferences the user stated about themselves (not the "
    "topic of the conversation), and forget remembered items the turn shows are no longer "
    "true. Remember nothing already known. When there is nothing to change, reply 'nothing'."
)
_ROUTES_WITHOUT_TOOLS = {"answer", "clarify"}
_AGENT_OUTPUT_SCHEMA = AgentOutput.model_json_schema()
_ROUTE_DECISION_SCHEMA = RouteDecision.model_json_schema()
# AgentScope's default summary schema of context compression, which its ContextConfig
# derives from the class each time one is made (about 0.2 ms an agent).
_SUMMARY_SCHEMA = SummarySchema.model_json_schema()

T = TypeVar("T")
# Backend tools run without asking: without a permission AgentScope stops the reply to ask
# the user (an AgentScope 2 default).
_ALLOWED = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="backend tool")
# A tool that requires approval: AgentScope stops the reply on its call and waits for the
# answer (a ``UserConfirmResultEvent``). Every call is asked about on its own (bypass-immune:
# otherwise a second call of the tool in the same turn would wait, unasked, for the rule the
# first one's approval might add).
_ASK = PermissionDecision(
    behavior=PermissionBehavior.ASK, message="requires approval", bypass_immune=True
)


class ClientTool(ToolBase):
    """A tool of the client's (AG-UI's frontend tools): offered to the model as the client
    describes it; the client runs it, so the reply stops on its call and waits for its
    result (AgentScope's external execution)."""

    is_external_tool = True

    def __init__(self, *, name: str, description: str, parameters: dict[str, Any] | None):
        super().__init__()
        self.name = name
        self.description = description
        self.input_schema = parameters or {"type": "object", "properties": {}}
        self.is_concurrency_safe = True
        self.is_read_only = False

    async def check_permissions(self, *_args: Any, **_kwargs: Any) -> PermissionDecision:
        return _ALLOWED


@dataclass(frozen=True)
class WorkerTools:
    """The worker's tools: backend tool functions, the names of those whose calls wait
    for approval, the tools of its MCP servers (their approval their own), and the
    client's tools."""

    backend: Sequence[Callable[..., Any]] = ()
    approval: frozenset[str] = frozenset()
    client: Sequence[ClientTool] = ()
    mcp: Sequence[ToolBase] = ()

    def toolkit(self) -> Toolkit:
        tools: list[ToolBase] = [
            FunctionTool(tool, permission=_ASK if tool.__name__ in self.approval else _ALLOWED)
            for tool in self.backend
        ]
        return Toolkit(tools=[*tools, *self.mcp, *self.client])


async def mcp_tools(servers: Sequence[McpServer]) -> list[ToolBase]:
    """The tools of a stage's MCP servers, those of a server that requires approval asking
    for it on each call."""
    return await mcp_tools_for(servers, allow=_ALLOWED, ask=_ASK)


def tool_name(tool: Callable[..., Any] | ToolBase) -> str:
    """A backend tool's name: a function's own, an AgentScope tool's ``name``."""
    return tool.name if isinstance(tool, ToolBase) else tool.__name__


def conversation(
    history: Sequence[tuple[str, str]],
    user_content: str | list[TextBlock | DataBlock],
    *,
    speaker: str = Stage.WORKER,
) -> list[Msg]:
    """The thread's earlier (role, content) messages and the user's new one (text, or text
    and images), as AgentScope messages."""
    messages: list[Msg] = [
        UserMsg(name="user", content=content)
        if role == "user"
        else AssistantMsg(name=speaker, content=content)
        for role, content in history
    ]
    messages.append(UserMsg(name="user", content=user_content))
    return messages


def user_content_with_images(
    text: str, images: Sequence[tuple[str, bytes]]
) -> list[TextBlock | DataBlock]:
    """The user's text and images ((mime type, bytes), sent inline as base64: a provider
    cannot reach this service's signed URLs) as AgentScope content blocks."""
    blocks: list[TextBlock | DataBlock] = [TextBlock(text=text)]
    for mime_type, content in images:
        source = Base64Source(data=base64.b64encode(content).decode("ascii"), media_type=mime_type)
        blocks.append(DataBlock(source=source))
    return blocks


def instructions(base: str, *, context: str = "", memory_notes: str = "") -> str:
    """A stage's system prompt: its own, the runtime config's context, and what is known
    about the user."""
    parts = [base]
    if context:
        parts.append(context)
    if memory_notes:
        parts.append(f"What you know about the user (from earlier conversations):\n{memory_notes}")
    return "\n\n".join(parts)


async def router_decide(
    *,
    model: ChatModelBase,
    messages: list[Msg],
    tools: Sequence[Callable[..., Any] | ToolBase],
    system_prompt: str,
) -> RouteDecision:
    """The route for this turn and the tools the worker gets (a subset of ``tools``). A model
    that gives no usable decision means: use every enabled tool."""
    names = [tool_name(tool) for tool in tools]
    menu = "\n".join(f"- {tool_name(tool)}: {_summary(tool)}" for tool in tools) or "(none)"
    prompt = f"{system_prompt}\n\nTools the assistant can use:\n{menu}"
    try:
        response = await model.generate_structured_output(
            [SystemMsg(name="system", content=prompt), *messages],
            # As a JSON schema made once (given the class, AgentScope builds it every call).
            structured_model=_ROUTE_DECISION_SCHEMA,
        )
        decision = RouteDecision.model_validate(response.content)
    except (StructuredOutputError, ValidationError) as exc:
        logger.warning("router gave no usable decision (%s): using every enabled tool", exc)
        return RouteDecision(route="use_tools", tools=names)
    if decision.route in _ROUTES_WITHOUT_TOOLS:
        return decision.model_copy(update={"tools": []})
    chosen = [name for name in names if name in decision.tools]
    return decision.model_copy(update={"tools": chosen or names})


def worker_reply(
    *,
    model: ChatModelBase,
    messages: list[Msg],
    tools: Sequence[Callable[..., Any]] | WorkerTools,
    system_prompt: str,
    max_iters: int,
) -> AsyncIterator[Any]:
    """AgentScope's events for the worker's reply, then its final ``Msg``, whose
    ``structured_output`` is an ``AgentOutput`` when the model gave one."""
    tools = tools if isinstance(tools, WorkerTools) else WorkerTools(backend=tools)
    agent = worker_agent(model=model, tools=tools, system_prompt=system_prompt, max_iters=max_iters)
    return worker_reply_of(agent, messages)


def worker_agent(
    *,
    model: ChatModelBase,
    tools: WorkerTools,
    system_prompt: str,
    max_iters: int,
    state: dict[str, Any] | None = None,
) -> Agent:
    """The worker's agent; ``state``: the agent state of a reply it held (``agent.state``
    as JSON), which it goes on with."""
    return _agent(
        Stage.WORKER,
        model,
        tools.toolkit(),
        system_prompt,
        max_iters,
        state=None if state is None else AgentState.model_validate(state),
    )


def worker_reply_of(
    agent: Agent, inputs: list[Msg] | UserConfirmResultEvent | ExternalExecutionResultEvent
) -> AsyncIterator[Any]:
    """The worker agent's reply to the conversation, or the answers to the tool calls its
    held reply waits for (it then goes on with the schema it was given)."""
    if not isinstance(inputs, list):
        return agent.reply_stream(inputs, yield_final_msg=True)
    return agent.reply_stream(
        inputs,
        yield_final_msg=True,
        # As a JSON schema made once: given the class, AgentScope rebuilds the schema on
        # every look at its tool list (about a third of a demo run's time). The job
        # validates the output with the class.
        structured_schema=_AGENT_OUTPUT_SCHEMA,  # type: ignore[arg-type]  # a dict is taken
    )


def memory_reply(
    *,
    model: ChatModelBase,
    turn: str,
    tools: Sequence[Callable[..., Any]],
    system_prompt: str,
    max_iters: int,
) -> AsyncIterator[Any]:
    """AgentScope's events for the memory stage's reply to one finished turn."""
    agent = _agent(
        Stage.MEMORY, model, WorkerTools(backend=tools).toolkit(), system_prompt, max_iters
    )
    return agent.reply_stream([UserMsg(name="user", content=turn)], yield_final_msg=True)


def _agent(
    name: str,
    model: ChatModelBase,
    toolkit: Toolkit,
    system_prompt: str,
    max_iters: int,
    state: AgentState | None = None,
) -> Agent:
    return Agent(
        name=name,
        system_prompt=system_prompt,
        model=model,
        toolkit=toolkit,
        state=state,
        react_config=ReActConfig(max_iters=max_iters, structured_output_grace_iters=1),
        context_config=ContextConfig(summary_schema=deepcopy(_SUMMARY_SCHEMA)),
        # Without this AgentScope appends a runtime-state hint block to every prompt.
        injection_config=InjectionConfig(inject_runtime_state=False),
        # With tracing on, AgentScope's own spans of the reply and its tool calls.
        middlewares=tracing.agent_middlewares(),
    )


def _summary(tool: Callable[..., Any] | ToolBase) -> str:
    text = tool.description if isinstance(tool, ToolBase) else tool.__doc__
    return (text or "").strip().split("\n", 1)[0]
