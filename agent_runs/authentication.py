"""How callers prove who they are: ``Authorization: Bearer <token>`` (hashed ApiTokens), the
admin session, and short-lived signed stream tokens for browser ``EventSource``."""

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user, get_user_model
from django.core import signing
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from agent_runs.models import ApiToken

# last_used_at is for staff, not for accounting: write it at most this often per token.
_LAST_USED_RESOLUTION = timedelta(minutes=5)
_STREAM_TOKEN_SALT = "agent_runs.stream-token"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid Authorization header.")
        try:
            raw_key = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = api_token_get(raw_key=raw_key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def api_token_get(*, raw_key: str) -> ApiToken | None:
    """The active user's token for a raw key, with its ``last_used_at`` kept roughly current."""
    token = (
        ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash_key(raw_key)).first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def stream_token_issue(*, user: Any, thread_id: uuid.UUID) -> str:
    """A signed token that lets a browser ``EventSource`` read one thread's events."""
    return signing.dumps({"u": user.pk, "t": str(thread_id)}, salt=_STREAM_TOKEN_SALT)


def stream_request_user(*, request: HttpRequest, thread_id: uuid.UUID) -> Any | None:
    """The user behind an event-stream request: a bearer token, a stream token for this
    thread (``?token=``), or the session. ``None`` when there is none that holds."""
    header = request.headers.get("Authorization", "").split()
    if len(header) == 2 and header[0].lower() == "bearer":
        token = api_token_get(raw_key=header[1])
        return token.user if token else None
    if "token" in request.GET:
        return _stream_token_user(request.GET["token"], thread_id=thread_id)
    user = get_user(request)  # the admin session's user, or AnonymousUser
    return user if user.is_authenticated else None


def _stream_token_user(token: str, *, thread_id: uuid.UUID) -> Any | None:
    try:
        claims = signing.loads(
            token, salt=_STREAM_TOKEN_SALT, max_age=settings.AGENT_STREAM_TOKEN_TTL_SECONDS
        )
    except signing.BadSignature:
        return None
    if claims.get("t") != str(thread_id):
        return None
    return get_user_model().objects.filter(pk=claims.get("u"), is_active=True).first()
