"""API keys, as their owner sees them."""

from typing import Any

from django.db.models import QuerySet

from agent_runs.models import ApiToken


def api_tokens_of_user(*, user: Any) -> QuerySet[ApiToken]:
    """The user's API keys, revoked and expired ones too, newest first."""
    return ApiToken.objects.filter(user_id=user.pk).order_by("-created_at", "-pk")
