"""The OpenAI error body in the OpenAPI schema: ``{"error": {"message", "type", "param",
"code"}}`` (errors.py)."""

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

_WHEN = {
    400: "A request the API refuses (malformed JSON, a bad field)",
    401: "No credentials, or bad ones",
    404: "Not found, or not the caller's",
    409: "The conversation has a response in progress, or waits on an approval request; an "
    "approval request answered already (x-should-retry: false)",
    410: "An approval request that has expired",
    415: "The body is not JSON",
}

_ERROR = inline_serializer(
    name="OpenAIError",
    fields={
        "error": inline_serializer(
            name="OpenAIErrorDetail",
            fields={
                "message": serializers.CharField(),
                "type": serializers.CharField(),
                "param": serializers.CharField(allow_null=True),
                "code": serializers.CharField(allow_null=True),
            },
        )
    },
)


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    return {status: OpenApiResponse(_ERROR, description=_WHEN[status]) for status in statuses}
