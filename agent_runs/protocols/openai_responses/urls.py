"""The OpenAI Responses API (docs/protocols/openai-responses.md) under ``/openai/v1/``, over
the run core."""

from django.urls import path

from agent_runs.protocols.openai_responses.views import (
    ResponseCancelApi,
    ResponseCreateApi,
    ResponseDetailApi,
)

urlpatterns = [
    path("responses", ResponseCreateApi.as_view(), name="openai-responses"),
    path("responses/<str:response_id>", ResponseDetailApi.as_view(), name="openai-response"),
    path(
        "responses/<str:response_id>/cancel",
        ResponseCancelApi.as_view(),
        name="openai-response-cancel",
    ),
]
