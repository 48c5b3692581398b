"""The agent card (``GET /.well-known/agent-card.json``), A2A 1.0 section 8 "Agent Discovery",
as a hybrid both SDK generations read: the 1.0 fields (``supportedInterfaces``, the JSON-RPC
binding at ``{PUBLIC_BASE_URL}/a2a`` with protocol version 1.0) and the 0.3 ones
(``url``, ``preferredTransport``, ``protocolVersion``), merged by a2a-sdk's own
``agent_card_to_dict``. docs/protocols/a2a.md, The agent card."""

from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from django.conf import settings

from agent_runs.agent_config import system_agents

RPC_PATH = "/a2a"
MODES = ["text/plain", "application/json"]

_DESCRIPTION = (
    "An agent that answers in chat and acts with its tools; each task is a run of the agent, "
    "streamed as it works."
)


def rpc_url() -> str:
    return f"{settings.PUBLIC_BASE_URL}{RPC_PATH}"


def agent_card() -> AgentCard:
    """The card: the worker stage's configured tools as skills, streaming and push
    notifications on, Bearer authentication required."""
    tools = system_agents().agents.get("worker")
    skills = [
        AgentSkill(
            id=name,
            name=name.replace("_", " "),
            description=f"Uses the {name} tool.",
            tags=["tool", name.split("_")[0]],
        )
        for name in (tools.enabled_tools if tools else [])
    ] or [AgentSkill(id="chat", name="chat", description="Answers in chat.", tags=["chat"])]
    return AgentCard(
        name="agent",
        description=_DESCRIPTION,
        version="1.0.0",
        # The same URL twice: 1.0 first (a 1.0 client takes the first it speaks), then 0.3,
        # from which the card's 0.3 fields are made.
        supported_interfaces=[
            AgentInterface(url=rpc_url(), protocol_binding="JSONRPC", protocol_version=version)
            for version in ("1.0", "0.3")
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=False
        ),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=skills,
    )


def agent_card_json() -> dict[str, Any]:
    """The card as served: 1.0 and 0.3 fields together."""
    return agent_card_to_dict(agent_card())
