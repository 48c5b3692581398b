from django.urls import path

from agent_runs.views import RunCreateApi

urlpatterns = [
    path("runs", RunCreateApi.as_view(), name="run-create"),
]
