"""A2A (docs/protocols/a2a.md): the agent card where the SDKs look for it, and the JSON-RPC
endpoint the card names (``{PUBLIC_BASE_URL}/a2a``)."""

from django.urls import path

from agent_runs.protocols.a2a.views import A2ARpcApi, AgentCardApi

urlpatterns = [
    path(".well-known/agent-card.json", AgentCardApi.as_view(), name="a2a-agent-card"),
    path("a2a", A2ARpcApi.as_view(), name="a2a-jsonrpc"),
]
