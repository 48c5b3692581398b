"""The Agent Protocol's error body in the OpenAPI schema: ``{"error", "message",
"details"?}`` (errors.py), for both URL sets."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from agent_runs.protocols.agent_protocol.inbound import MAX_PAGE_NUMBER, MAX_PAGE_SIZE

_WHEN = {
    400: "Malformed input",
    401: "No credentials, or bad ones",
    404: "Not found, or not the caller's",
    409: "A conflict with the task's state (an approval answered already, or awaited)",
    410: "The approval has expired",
    413: "The file is too large",
    422: "A body the official set cannot read, or an approval's answer its schema refuses",
    503: "No worker started the task's run within the step wait",
}


class AgentProtocolErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="The status's reason phrase.")
    message = serializers.CharField(help_text="What went wrong.")
    details = serializers.JSONField(required=False, help_text="Each problem of a body.")


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    return {
        status: OpenApiResponse(AgentProtocolErrorSerializer, description=_WHEN[status])
        for status in statuses
    }


# A multipart upload: the file, and where it goes in the task's workspace.
UPLOAD_REQUEST = {
    "multipart/form-data": {
        "type": "object",
        "properties": {
            "file": {"type": "string", "format": "binary"},
            "relative_path": {"type": "string", "maxLength": 1024},
        },
        "required": ["file"],
    }
}


def page_parameters(*, page_key: str, size_key: str, default_size: int) -> list[OpenApiParameter]:
    """A list's page query (``inbound.page_query``), with its bounds."""
    return [
        OpenApiParameter(
            page_key,
            {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_NUMBER},
            description="The page, from 1 (default 1).",
        ),
        OpenApiParameter(
            size_key,
            {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
            description=f"Items per page, 1 to {MAX_PAGE_SIZE} (default {default_size}).",
        ),
    ]
