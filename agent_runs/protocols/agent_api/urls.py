"""The AgentScope Agent API (docs/protocols/agent-api.md): ``POST /api/v1/agent/process`` and
its response objects, over the run core."""

from django.urls import path

from agent_runs.protocols.agent_api import views

urlpatterns = [
    path("process", views.ProcessApi.as_view(), name="agent-api-process"),
    path("process/<str:response_id>", views.ResponseApi.as_view(), name="agent-api-response"),
    path(
        "process/<str:response_id>/cancel",
        views.ResponseCancelApi.as_view(),
        name="agent-api-response-cancel",
    ),
]
