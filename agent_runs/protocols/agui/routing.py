"""The AG-UI routes served by Channels consumers rather than Django views."""

from django.urls import path

from agent_runs.api.authentication import ScopeAuthMiddleware
from agent_runs.protocols.agui.stream import EventStreamConsumer

_events = ScopeAuthMiddleware(EventStreamConsumer.as_asgi())

http_urlpatterns = [
    path("api/v1/agent/runs/<uuid:thread_id>/events", _events),
    path("api/v1/agent/runs/<uuid:thread_id>/events/", _events),
]
