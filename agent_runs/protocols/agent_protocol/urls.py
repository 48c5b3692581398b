"""The Agent Protocol's routes: the spec set under ``/api/`` and the official v1 set under
``/ap/v1/agent/`` (both included from config/urls.py)."""

from django.urls import path

from agent_runs.protocols.agent_protocol import views, views_v1

_task = "tasks/<str:task_id>"
_step = f"{_task}/steps/<str:step_id>"
_artifact = f"{_step}/artifacts/<str:artifact_id>"

spec_urlpatterns = [
    path("tasks", views.TaskListApi.as_view(), name="ap-tasks"),
    path(_task, views.TaskDetailApi.as_view(), name="ap-task"),
    path(f"{_task}/pause", views.TaskPauseApi.as_view(), name="ap-pause"),
    path(f"{_task}/resume", views.TaskResumeApi.as_view(), name="ap-resume"),
    path(f"{_task}/cancel", views.TaskCancelApi.as_view(), name="ap-cancel"),
    path(f"{_task}/steps", views.StepListApi.as_view(), name="ap-steps"),
    path(_step, views.StepDetailApi.as_view(), name="ap-step"),
    path(f"{_step}/artifacts", views.StepArtifactListApi.as_view(), name="ap-step-artifacts"),
    path(_artifact, views.StepArtifactDetailApi.as_view(), name="ap-step-artifact"),
    path(f"{_artifact}/download", views.StepArtifactDownloadApi.as_view(), name="ap-download"),
]

v1_urlpatterns = [
    path("tasks", views_v1.TaskListApi.as_view(), name="ap-v1-tasks"),
    path(_task, views_v1.TaskDetailApi.as_view(), name="ap-v1-task"),
    path(f"{_task}/steps", views_v1.StepListApi.as_view(), name="ap-v1-steps"),
    path(_step, views_v1.StepDetailApi.as_view(), name="ap-v1-step"),
    path(f"{_task}/artifacts", views_v1.ArtifactListApi.as_view(), name="ap-v1-artifacts"),
    path(
        f"{_task}/artifacts/<str:artifact_id>",
        views_v1.ArtifactDownloadApi.as_view(),
        name="ap-v1-artifact",
    ),
]
