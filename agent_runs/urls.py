"""The run core's HTTP routes: one include per protocol package (agent_runs/protocols/)."""

from django.urls import include, path

urlpatterns = [
    path("", include("agent_runs.protocols.agui.urls")),
    path("", include("agent_runs.protocols.agui.thread_urls")),
]
