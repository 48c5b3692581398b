from django.urls import path

from agent_runs.views import RunCreateApi, StreamTokenCreateApi, run_events_stream

urlpatterns = [
    path("runs", RunCreateApi.as_view(), name="run-create"),
    path("runs/<uuid:thread_id>/events", run_events_stream, name="run-events"),
    path(
        "runs/<uuid:thread_id>/stream-token",
        StreamTokenCreateApi.as_view(),
        name="run-stream-token",
    ),
]
