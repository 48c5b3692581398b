"""The Agent Protocol's WebSocket route (``/ws``, docs/spec/agent-protocol-tasks.md, WebSocket
Events), served by a Channels consumer."""

from django.urls import path

from agent_runs.api.authentication import ScopeAuthMiddleware
from agent_runs.protocols.agent_protocol.consumers import TaskEventsConsumer

websocket_urlpatterns = [
    path("ws", ScopeAuthMiddleware(TaskEventsConsumer.as_asgi())),
]
