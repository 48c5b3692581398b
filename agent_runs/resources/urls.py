"""The service's own REST routes: threads and runs, the interrupts, the caller's API keys and
automation jobs (mounted at api/v1/agent/ by config/urls.py, after AG-UI's). GET
runs/<run_id> sits beside AG-UI's POST runs and runs/<run_id>/cancel: no path is both."""

from django.urls import path

from agent_runs.resources.views.automations import (
    AutomationJobDetailApi,
    AutomationJobListApi,
    AutomationJobRunApi,
    AutomationJobRunListApi,
)
from agent_runs.resources.views.keys import ApiKeyListApi
from agent_runs.resources.views.threads import (
    InterruptDetailApi,
    InterruptListApi,
    RunDetailApi,
    ThreadDetailApi,
    ThreadListApi,
    ThreadRunListApi,
)

urlpatterns = [
    path("threads", ThreadListApi.as_view(), name="thread-list"),
    path("threads/<uuid:thread_id>", ThreadDetailApi.as_view(), name="thread-detail"),
    path("threads/<uuid:thread_id>/runs", ThreadRunListApi.as_view(), name="thread-run-list"),
    path("runs/<str:run_id>", RunDetailApi.as_view(), name="run-detail"),
    path("interrupts", InterruptListApi.as_view(), name="interrupt-list"),
    path("interrupts/<str:interrupt_id>", InterruptDetailApi.as_view(), name="interrupt-detail"),
    path("keys", ApiKeyListApi.as_view(), name="key-list"),
    path("automations", AutomationJobListApi.as_view(), name="automation-list"),
    path("automations/<str:job_id>", AutomationJobDetailApi.as_view(), name="automation-detail"),
    path("automations/<str:job_id>/run", AutomationJobRunApi.as_view(), name="automation-run"),
    path(
        "automations/<str:job_id>/runs",
        AutomationJobRunListApi.as_view(),
        name="automation-run-list",
    ),
]
