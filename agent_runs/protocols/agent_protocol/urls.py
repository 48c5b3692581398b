"""The Agent Protocol's routes: the spec set under ``/api/`` and the official v1 set under
``/ap/v1/agent/`` (both included from config/urls.py)."""

from django.urls import path

from agent_runs.protocols.agent_protocol.views import spec, v1

_task = "tasks/<str:task_id>"
_step = f"{_task}/steps/<str:step_id>"
_artifact = f"{_step}/artifacts/<str:artifact_id>"

spec_urlpatterns = [
    path("tasks", spec.TaskListApi.as_view(), name="ap-tasks"),
    path(_task, spec.TaskDetailApi.as_view(), name="ap-task"),
    path(f"{_task}/pause", spec.TaskPauseApi.as_view(), name="ap-pause"),
    path(f"{_task}/resume", spec.TaskResumeApi.as_view(), name="ap-resume"),
    path(f"{_task}/cancel", spec.TaskCancelApi.as_view(), name="ap-cancel"),
    path(f"{_task}/steps", spec.StepListApi.as_view(), name="ap-steps"),
    path(_step, spec.StepDetailApi.as_view(), name="ap-step"),
    path(f"{_step}/artifacts", spec.StepArtifactListApi.as_view(), name="ap-step-artifacts"),
    path(_artifact, spec.StepArtifactDetailApi.as_view(), name="ap-step-artifact"),
    path(f"{_artifact}/download", spec.StepArtifactDownloadApi.as_view(), name="ap-download"),
]

v1_urlpatterns = [
    path("tasks", v1.TaskListApi.as_view(), name="ap-v1-tasks"),
    path(_task, v1.TaskDetailApi.as_view(), name="ap-v1-task"),
    path(f"{_task}/steps", v1.StepListApi.as_view(), name="ap-v1-steps"),
    path(_step, v1.StepDetailApi.as_view(), name="ap-v1-step"),
    path(f"{_task}/artifacts", v1.ArtifactListApi.as_view(), name="ap-v1-artifacts"),
    path(
        f"{_task}/artifacts/<str:artifact_id>",
        v1.ArtifactDownloadApi.as_view(),
        name="ap-v1-artifact",
    ),
]
