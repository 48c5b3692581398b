"""How callers prove who they are: ``Authorization: Bearer <token>`` (hashed ApiTokens), the
admin session, and short-lived signed stream tokens for browser ``EventSource``. The edge
kit's: DRF's authentication and permission classes (config/settings/web.py) and the Channels
middleware of the streams resolve the caller once per request; a token is found by the core's
token services (agent_runs/services/tokens.py), which keep the per-process token cache that
revoking a key empties."""

import uuid
from functools import partial
from importlib import import_module
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import parse_qs

from django.conf import settings
from django.contrib.auth import get_user, get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core import signing
from django.http.cookie import parse_cookie
from django.utils import timezone
from django.utils.functional import SimpleLazyObject
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from agent_runs.models import ApiToken
from agent_runs.services.tokens import api_token_find, api_token_get

_STREAM_TOKEN_SALT = "agent_runs.stream-token"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        try:
            raw_key = bearer_key(b" ".join(header).decode())
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if raw_key is None:
            raise exceptions.AuthenticationFailed("Invalid Authorization header.")
        token = api_token_find(raw_key=raw_key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        unusable = token.unusable_because(timezone.now())
        if unusable is not None:
            raise exceptions.AuthenticationFailed(f"This API key has {unusable_words[unusable]}.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


unusable_words = {"expired": "expired", "revoked": "been revoked"}


class ApiKeyScopes(permissions.BasePermission):
    """An API key's scopes (``ApiToken.scopes``), checked for every DRF view: ``read`` for
    the safe methods, ``write`` for the others. A view whose POST may only read says so with
    ``api_key_scope = "read"``, or checks the scope itself (``api_key_scope = None``, then
    ``api_key_scope_require``), as A2A's JSON-RPC does per method. A session, or no key,
    has every scope."""

    def has_permission(self, request: Request, view: Any) -> bool:
        safe = request.method in permissions.SAFE_METHODS
        default = ApiToken.Scope.READ if safe else ApiToken.Scope.WRITE
        scope = getattr(view, "api_key_scope", default)
        if scope is not None:
            api_key_scope_require(request, scope)
        return True


def api_key_scope_require(request: Request, scope: str) -> None:
    """Refuse (403) a request made with an API key that lacks ``scope``."""
    token = request.auth
    if isinstance(token, ApiToken) and scope not in token.scope_list:
        raise exceptions.PermissionDenied(f"this API key lacks the {scope} scope")


def request_user(request: Request) -> AbstractBaseUser:
    """The caller of a view whose permission (``IsAuthenticated``, the default) has already
    refused anonymous callers."""
    return cast(AbstractBaseUser, request.user)


def stream_token_issue(*, user: Any, thread_id: uuid.UUID) -> str:
    """A signed token that lets a browser ``EventSource`` read one thread's events."""
    return signing.dumps({"u": user.pk, "t": str(thread_id)}, salt=_STREAM_TOKEN_SALT)


def bearer_key(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else ``None``."""
    parts = authorization.split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


class ScopeAuthMiddleware:
    """Channels middleware: ``scope["user"]`` for streaming endpoints (SSE, WebSocket), from
    a bearer token, a stream token for the routed thread (``?token=``), or the admin
    session, in that order; ``AnonymousUser`` when none holds. It is resolved lazily, on
    first use, in synchronous code: a consumer reads it in the same trip to the executor as
    its own first query (a stream opens with one)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        # Set on the routed scope, not on a copy: Channels' URL router gives each connection
        # a scope of its own, and a copy would be kept by every open stream.
        scope["user"] = SimpleLazyObject(partial(_scope_user_or_anonymous, scope))
        return await self.inner(scope, receive, send)


def _scope_user_or_anonymous(scope: dict[str, Any]) -> Any:
    return scope_user(scope) or AnonymousUser()


def scope_user(scope: dict[str, Any]) -> Any | None:
    headers = {name.lower(): value for name, value in scope.get("headers", [])}
    raw_key = bearer_key(headers.get(b"authorization", b"").decode("latin-1"))
    if raw_key is not None:
        token = api_token_get(raw_key=raw_key)
        return token.user if token else None
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    thread_id = scope.get("url_route", {}).get("kwargs", {}).get("thread_id")
    if "token" in query:
        return _stream_token_user(query["token"][0], thread_id=thread_id)
    # Django's own lenient parser: a malformed Cookie header is no session, never an error.
    cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
    session_key = cookies.get(settings.SESSION_COOKIE_NAME)
    if not session_key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]  # reads .session
    return user if user.is_authenticated else None


def _stream_token_user(token: str, *, thread_id: uuid.UUID | None) -> Any | None:
    try:
        claims = signing.loads(
            token, salt=_STREAM_TOKEN_SALT, max_age=settings.AGENT_STREAM_TOKEN_TTL_SECONDS
        )
    except signing.BadSignature:
        return None
    if thread_id is None or claims.get("t") != str(thread_id):
        return None
    return get_user_model().objects.filter(pk=claims.get("u"), is_active=True).first()


def stream_token_grant(token: str) -> tuple[Any, uuid.UUID] | None:
    """The active user a stream token was issued to and the one thread it names, for a
    stream with no thread in its path (the Agent Protocol's WebSocket, which may then follow
    that thread only); ``None`` for a bad or expired token."""
    try:
        claims = signing.loads(
            token, salt=_STREAM_TOKEN_SALT, max_age=settings.AGENT_STREAM_TOKEN_TTL_SECONDS
        )
        thread_id = uuid.UUID(str(claims.get("t")))
    except (signing.BadSignature, ValueError):
        return None
    user = get_user_model().objects.filter(pk=claims.get("u"), is_active=True).first()
    return None if user is None else (user, thread_id)
