import uuid
from typing import cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.authentication import stream_token_issue
from agent_runs.errors import RunPayloadTooLarge
from agent_runs.protocols.agui.parsing import (
    MAX_PAYLOAD_BYTES,
    MalformedJson,
    decode_json_body,
    parse_run_agent_input,
)
from agent_runs.protocols.agui.schemas import task_accepted_response
from agent_runs.run_input import parse_uuid
from agent_runs.selectors.runs import run_get_for_user, thread_get_for_user
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.runs import run_create


class RunCreateApi(APIView):
    """``POST /api/v1/agent/runs``: accept a RunAgentInput, answer TaskAcceptedResponse."""

    def post(self, request: Request) -> Response:
        body = _read_body(request)
        try:
            raw = decode_json_body(body)
        except MalformedJson as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        run_input = parse_run_agent_input(raw)
        # IsAuthenticated has already refused anonymous callers.
        user = cast(AbstractBaseUser, request.user)
        run = run_create(user=user, run_input=run_input)
        response = task_accepted_response(run=run)
        return Response(response.to_wire(), status=status.HTTP_202_ACCEPTED)


def _read_body(request: Request) -> bytes:
    """The raw body, after the size rule (spec: payload ≤ 256KB, measured before parsing)."""
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json":
        raise UnsupportedMediaType(content_type or "none")
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > MAX_PAYLOAD_BYTES:
        raise RunPayloadTooLarge()
    try:
        body = request.body
    except RequestDataTooBig:
        raise RunPayloadTooLarge() from None
    if len(body) > MAX_PAYLOAD_BYTES:
        raise RunPayloadTooLarge()
    return body


class StreamTokenCreateApi(APIView):
    """``POST /api/v1/agent/runs/{thread_id}/stream-token``: a short-lived token for
    ``EventSource``, which cannot send an Authorization header."""

    def post(self, request: Request, thread_id: uuid.UUID) -> Response:
        thread = thread_get_for_user(user=cast(AbstractBaseUser, request.user), thread_id=thread_id)
        token = stream_token_issue(user=request.user, thread_id=thread.id)
        ttl = settings.AGENT_STREAM_TOKEN_TTL_SECONDS
        return Response({"token": token, "expiresIn": ttl}, status=status.HTTP_201_CREATED)


class RunCancelApi(APIView):
    """``POST /api/v1/agent/runs/{run_id}/cancel``: stop a run (owner only). The ``threadId``
    query parameter picks the thread when the caller used the same runId in several."""

    def post(self, request: Request, run_id: str) -> Response:
        thread_id = request.query_params.get("threadId")
        run = run_get_for_user(
            user=cast(AbstractBaseUser, request.user),
            run_id=run_id,
            thread_id=_thread_id_or_404(thread_id) if thread_id else None,
        )
        run = run_cancel(run=run)
        body = {"threadId": str(run.thread_id), "runId": run.run_id, "status": run.status}
        return Response(body, status=status.HTTP_200_OK)


def _thread_id_or_404(value: str) -> uuid.UUID:
    thread_id = parse_uuid(value)
    if thread_id is None:
        raise Http404
    return thread_id
