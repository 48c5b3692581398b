"""What this server's AG-UI agent does, as AG-UI 1.0's ``AgentCapabilities``
(``GET /api/v1/agent/ag-ui/capabilities``): only what it really does is ``true``; what it does
not do yet is ``false`` (encrypted reasoning), and what AG-UI asks that does not apply is
left out. (An interrupt here is a tool call waiting for an approval; a client's tools are
offered to the worker and their calls left to the client.)"""

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ag_ui.core import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    StateCapabilities,
    ToolsCapabilities,
    TransportCapabilities,
)


@cache
def agent_capabilities() -> dict[str, Any]:
    capabilities = AgentCapabilities(
        identity=IdentityCapabilities(
            name="agent",
            type="agent-run-server",
            description="A router, a worker with backend tools (the calendar, memory) and a "
            "memory stage, run by a background worker; every step in a durable journal.",
            version=_version(),
        ),
        # The run's stream (SSE), resumable from any event by Last-Event-ID on
        # GET /api/v1/agent/runs/{threadId}/events.
        transport=TransportCapabilities(streaming=True, resumable=True, websocket=False),
        # The server's own tools, and the client's (RunAgentInput.tools), called by the
        # model in parallel where it asks.
        tools=ToolsCapabilities(supported=True, client_provided=True, parallel_calls=True),
        # Threads and their journal persist; the memory stage keeps notes about the user.
        state=StateCapabilities(snapshots=False, deltas=False, memory=True),
        # A reasoning model's thinking (its reasoning_content), streamed a delta at a time
        # as REASONING_* events; in the clear, as the provider gives it, never encrypted.
        reasoning=ReasoningCapabilities(supported=True, streaming=True, encrypted=False),
        multimodal=MultimodalCapabilities(
            input=MultimodalInputCapabilities(
                image=True, audio=False, video=False, pdf=False, file=False
            )
        ),
        # Approvals of backend tool calls, answered by a run's resume (edited arguments
        # too); no other kind of intervention.
        human_in_the_loop=HumanInTheLoopCapabilities(
            supported=True, approvals=True, interventions=False, feedback=False
        ),
        # AG-UI names no field for it: a run stops when its request is aborted, or by
        # POST /api/v1/agent/runs/{runId}/cancel.
        custom={"cancel": True},
    )
    return capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)


def _version() -> str:
    try:
        return version("agent-run-server")
    except PackageNotFoundError:  # run from a checkout without installing it
        return "0"
