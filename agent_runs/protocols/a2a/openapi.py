"""The JSON-RPC error object in the OpenAPI schema: ``{"jsonrpc", "id", "error": {"code",
"message", "data"}}`` (errors.py). JSON-RPC errors are answered with HTTP 200; only what is
refused before the method is read has its own status."""

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

_WHEN = {
    401: "No credentials, or bad ones",
    406: "The client accepts no JSON",
}

_ERROR = inline_serializer(
    name="A2AError",
    fields={
        "jsonrpc": serializers.CharField(),
        "id": serializers.CharField(allow_null=True),
        "error": inline_serializer(
            name="A2AErrorDetail",
            fields={
                "code": serializers.IntegerField(),
                "message": serializers.CharField(),
                "data": serializers.ListField(child=serializers.DictField(), required=False),
            },
        ),
    },
)


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    return {status: OpenApiResponse(_ERROR, description=_WHEN[status]) for status in statuses}
