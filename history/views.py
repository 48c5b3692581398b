from typing import cast

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from agent_runs.api.openapi import error_responses
from history import selectors
from history.schemas import HistorySnapshotResponse, parse_history_query


class HistorySnapshotApi(APIView):
    """``GET /api/v1/agent/history?threadId=&before=YYYY-MM-DD``: one day of a thread
    (docs/spec/run-agent-input.md, History API)."""

    @extend_schema(
        operation_id="history_retrieve",
        summary="One day of a thread's history",
        description="The most recent of the user's days with visible messages (before "
        "`before` when given) in `threadId`, or in the caller's latest thread.",
        tags=["history"],
        parameters=[
            OpenApiParameter("threadId", OpenApiTypes.UUID, description="The thread."),
            OpenApiParameter("before", OpenApiTypes.DATE, description="Only days before this one."),
            OpenApiParameter(
                "include",
                OpenApiTypes.STR,
                enum=["reasoning"],
                description="`reasoning`: a model's reasoning before its answers too.",
            ),
        ],
        responses={
            200: HistorySnapshotResponse,
            **error_responses(
                401,
                404,
                422,
                e422="A threadId that is not a UUID, a before that is not a date, or an "
                "include other than reasoning",
            ),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        query = parse_history_query(request.query_params)
        snapshot = selectors.history_snapshot_get(
            # IsAuthenticated has already refused anonymous callers.
            user=cast(AbstractBaseUser, request.user),
            thread_id=query.thread_id,
            before=query.before,
            include_reasoning=query.include_reasoning,
        )
        # pydantic writes the JSON itself: the renderer's second pass over a day of messages
        # is a fair part of the call.
        return HttpResponse(snapshot.to_wire_json(), content_type="application/json")
