"""``GET /api/v1/agent/keys``: the caller's API keys (docs/protocols/agui.md,
Authentication), never their secrets: only the hash of a key is stored."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.api.authentication import request_user
from agent_runs.api.openapi import error_responses
from agent_runs.models import ApiToken
from agent_runs.selectors.tokens import api_tokens_of_user


class ApiKeySerializer(serializers.Serializer):
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first characters, to tell keys apart.")
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=ApiToken.Scope.choices), source="scope_list"
    )
    createdAt = serializers.DateTimeField(source="created_at")
    lastUsedAt = serializers.DateTimeField(
        source="last_used_at", allow_null=True, help_text="To within five minutes."
    )
    expiresAt = serializers.DateTimeField(
        source="expires_at", allow_null=True, help_text="Null: it never expires."
    )
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    current = serializers.SerializerMethodField(
        help_text="Whether this request was made with this key."
    )

    def get_current(self, token: ApiToken) -> bool:
        current: Any = self.context.get("current")
        return isinstance(current, ApiToken) and current.pk == token.pk


class ApiKeyListSerializer(serializers.Serializer):
    keys = ApiKeySerializer(many=True)


class ApiKeyListApi(APIView):
    """The caller's API keys, revoked and expired ones too, newest first."""

    @extend_schema(
        operation_id="keys_list",
        summary="The caller's API keys",
        description="Name, prefix, scopes and dates of each of the caller's API keys, newest "
        "first; never the key itself. Keys are made by `manage.py create_api_token` and "
        "revoked in the admin.",
        tags=["keys"],
        responses={200: ApiKeyListSerializer, **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        tokens = api_tokens_of_user(user=request_user(request))
        context = {"current": request.auth}
        return Response(ApiKeyListSerializer({"keys": tokens}, context=context).data)
