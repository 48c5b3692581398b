"""The Agent API in the OpenAPI schema: its request (``AgentRequest``), its answers (a response
object, or its stream) and its error body ``{"error": {"code", "message"}}`` (errors.py)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers

from agent_runs.api.openapi import event_stream_response
from agent_runs.protocols.agent_api.inbound import AgentRequest

_WHEN = {
    400: "A body that is not an AgentRequest this server takes, or a bad parameter",
    401: "No credentials, or bad ones",
    404: "Not found, or not the caller's (a session, a response)",
    409: "A response id the caller used in several sessions; or, with `multitask: reject`, "
    "a busy session",
    415: "A body that is not JSON, or an image that is not one",
    422: "An image URL that is not a valid, unexpired signed URL of the caller's",
}


class AgentApiErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="A stable code: not_found, invalid_request, …")
    message = serializers.CharField(help_text="What went wrong.")


class AgentApiErrorSerializer(serializers.Serializer):
    error = AgentApiErrorDetailSerializer(help_text="The spec's Error.")


def error_responses(*statuses: int) -> dict[tuple[int, str], OpenApiResponse]:
    return {
        (status, "application/json"): OpenApiResponse(
            AgentApiErrorSerializer, description=_WHEN[status]
        )
        for status in statuses
    }


AGENT_REQUEST = AgentRequest

_SESSION = "my-session"
_RESPONSE_EXAMPLE = {
    "sequence_number": 9,
    "object": "response",
    "status": "completed",
    "id": "response_0b7c5d1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e",
    "created_at": 1795397400,
    "completed_at": 1795397402,
    "error": None,
    "output": [
        {
            "object": "message",
            "status": "completed",
            "id": "msg_5b0e2f4c-9d1a-5e3b-8c7f-1a2b3c4d5e6f",
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "object": "content",
                    "status": "completed",
                    "index": 0,
                    "msg_id": "msg_5b0e2f4c-9d1a-5e3b-8c7f-1a2b3c4d5e6f",
                    "type": "text",
                    "delta": False,
                    "text": "Hello!",
                }
            ],
            "metadata": {},
        }
    ],
    "usage": {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16},
    "session_id": _SESSION,
}
RESPONSE_OBJECT = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="A response object (docs/spec/agent-api-protocol.md, 6. Response Models).",
    examples=[OpenApiExample("completed", value=_RESPONSE_EXAMPLE, response_only=True)],
)
STREAM_RESPONSE = event_stream_response(
    "Server-sent events, one object each: `id:` its sequence_number (contiguous "
    "from 0), `data:` the response, message or content object. Response `created`, "
    "`in_progress`, messages and content deltas, then the response `completed`, `failed` or "
    "`canceled`.",
    example_name="stream",
    example='id: 0\ndata: {"sequence_number":0,"object":"response","status":"created",…}\n\n',
)
