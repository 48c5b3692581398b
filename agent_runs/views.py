import json
from typing import cast

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs import services
from agent_runs.errors import RunPayloadTooLarge
from agent_runs.schemas import MAX_PAYLOAD_BYTES, parse_run_agent_input


class RunCreateApi(APIView):
    """``POST /api/v1/agent/runs``: accept a RunAgentInput, answer TaskAcceptedResponse."""

    def post(self, request: Request) -> Response:
        body = _read_body(request)
        try:
            raw = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        run_input = parse_run_agent_input(raw)
        # IsAuthenticated has already refused anonymous callers.
        user = cast(AbstractBaseUser, request.user)
        run = services.run_create(user=user, run_input=run_input)
        response = services.task_accepted_response(run=run)
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
