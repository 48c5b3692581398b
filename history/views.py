from typing import cast

from django.contrib.auth.models import AbstractBaseUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from history import selectors
from history.schemas import parse_history_query


class HistorySnapshotApi(APIView):
    """``GET /api/v1/agent/history?threadId=&before=YYYY-MM-DD``: one day of a thread
    (spec/run-agent-input.md, History API)."""

    def get(self, request: Request) -> Response:
        query = parse_history_query(request.query_params)
        snapshot = selectors.history_snapshot_get(
            # IsAuthenticated has already refused anonymous callers.
            user=cast(AbstractBaseUser, request.user),
            thread_id=query.thread_id,
            before=query.before,
        )
        return Response(snapshot.to_wire())
