from typing import cast

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from history import selectors
from history.schemas import parse_history_query


class HistorySnapshotApi(APIView):
    """``GET /api/v1/agent/history?threadId=&before=YYYY-MM-DD``: one day of a thread
    (docs/spec/run-agent-input.md, History API)."""

    def get(self, request: Request) -> HttpResponse:
        query = parse_history_query(request.query_params)
        snapshot = selectors.history_snapshot_get(
            # IsAuthenticated has already refused anonymous callers.
            user=cast(AbstractBaseUser, request.user),
            thread_id=query.thread_id,
            before=query.before,
        )
        # pydantic writes the JSON itself: the renderer's second pass over a day of messages
        # is a fair part of the call.
        return HttpResponse(snapshot.to_wire_json(), content_type="application/json")
