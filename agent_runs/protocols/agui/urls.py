from django.urls import path

from agent_runs.protocols.agui.views import (
    CapabilitiesApi,
    ConversationRunApi,
    RunCancelApi,
    RunCreateApi,
    StreamTokenCreateApi,
)

# GET runs/<thread_id>/events is a Channels consumer: see routing.py.
urlpatterns = [
    path("runs", RunCreateApi.as_view(), name="run-create"),
    path("ag-ui", ConversationRunApi.as_view(), name="agui-conversation"),
    path("ag-ui/capabilities", CapabilitiesApi.as_view(), name="agui-capabilities"),
    path("runs/<str:run_id>/cancel", RunCancelApi.as_view(), name="run-cancel"),
    path(
        "runs/<uuid:thread_id>/stream-token",
        StreamTokenCreateApi.as_view(),
        name="run-stream-token",
    ),
]
