"""API tokens (API keys): created for a user, shown once, stored as a hash; found by their raw
key (remembered per process, with ``last_used_at`` kept roughly current); revoked."""

import copy
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agent_runs.models import ApiToken

# last_used_at is for staff, not for accounting: write it at most this often per token.
_LAST_USED_RESOLUTION = timedelta(minutes=5)
DEFAULT_SCOPES = (ApiToken.Scope.READ, ApiToken.Scope.WRITE)


@transaction.atomic
def api_token_create(
    *,
    username: str,
    name: str = "",
    scopes: Iterable[str] = DEFAULT_SCOPES,
    expires_in: timedelta | None = None,
) -> str:
    """Create the user if missing and a new API token for it; return the raw token, which
    is shown once and stored only as a hash. ``scopes``: ``read``, or ``read`` and
    ``write`` (a key that may write may read); ``expires_in``: none, it never expires."""
    scope_set = set(scopes)
    if not scope_set or not scope_set <= set(ApiToken.Scope.values):
        raise ValueError(f"scopes are {' and '.join(ApiToken.Scope.values)}, not {scopes!r}")
    if ApiToken.Scope.READ not in scope_set:
        raise ValueError("a key with the write scope has the read scope too: read,write")
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    raw_key = secrets.token_urlsafe(32)
    ApiToken.objects.create(
        user=user,
        name=name,
        key_hash=ApiToken.hash_key(raw_key),
        prefix=raw_key[:8],
        scopes=",".join(scope for scope in ApiToken.Scope.values if scope in scope_set),
        expires_at=timezone.now() + expires_in if expires_in is not None else None,
    )
    return raw_key


def api_tokens_revoke(*, tokens: Iterable[ApiToken]) -> int:
    """Revoke the tokens not revoked yet: from now on they authenticate no one (in other
    processes, within ``AGENT_API_TOKEN_CACHE_SECONDS``). Returns how many were revoked."""
    ids = [token.pk for token in tokens]
    revoked = ApiToken.objects.filter(pk__in=ids, revoked_at__isnull=True)
    key_hashes = list(revoked.values_list("key_hash", flat=True))
    count = revoked.update(revoked_at=timezone.now())
    api_token_forget(key_hashes=key_hashes)
    return count


def api_token_get(*, raw_key: str) -> ApiToken | None:
    """The active user's usable (neither expired nor revoked) token for a raw key."""
    token = api_token_find(raw_key=raw_key)
    if token is None or token.unusable_because(timezone.now()) is not None:
        return None
    return token


def api_token_find(*, raw_key: str) -> ApiToken | None:
    """The active user's token for a raw key, expired or revoked ones too, with the
    ``last_used_at`` of a usable one kept roughly current.

    A token found is remembered in this process for ``AGENT_API_TOKEN_CACHE_SECONDS`` (every
    request of a client carries it, and looking it up was the costliest part of a small
    request): a token deleted, or a user deactivated, stops working within that time. Each
    caller gets copies of the token and its user, never the remembered objects."""
    key_hash = ApiToken.hash_key(raw_key)
    now = time.monotonic()
    cached = _token_cache.get(key_hash)
    if cached is None or cached.expires_at <= now:
        cached = _token_load(key_hash, now)
        if cached is None:
            return None
    moment = timezone.now()
    usable = cached.token.unusable_because(moment) is None
    if usable and (
        cached.last_used_at is None or moment - cached.last_used_at > _LAST_USED_RESOLUTION
    ):
        cached.last_used_at = moment
        ApiToken.objects.filter(pk=cached.token.pk).update(last_used_at=moment)
    token, user = copy.copy(cached.token), copy.copy(cached.token.user)
    token.user = user
    return token


@dataclass
class _CachedToken:
    token: ApiToken  # with its user (an active one), as read
    last_used_at: datetime | None  # as written last, by this process or read
    expires_at: float  # time.monotonic()


# key hash -> the token as read lately. Only tokens that exist are kept (an unknown key is
# looked up every time, so guessing cannot fill it); it is emptied when it grows past
# _TOKEN_CACHE_PRUNE_AT. Request threads share it: each step is one dict operation.
_token_cache: dict[str, _CachedToken] = {}
_TOKEN_CACHE_PRUNE_AT = 10_000


def api_token_forget(*, key_hashes: list[str]) -> None:
    """Drop tokens from this process's memory (a revoked key fails here at once; other
    processes read it again within ``AGENT_API_TOKEN_CACHE_SECONDS``)."""
    for key_hash in key_hashes:
        _token_cache.pop(key_hash, None)


def _token_load(key_hash: str, now: float) -> _CachedToken | None:
    found = list(ApiToken.objects.select_related("user").filter(key_hash=key_hash)[:1])
    token = found[0] if found else None
    if token is None or not token.user.is_active:
        _token_cache.pop(key_hash, None)
        return None
    cached = _CachedToken(
        token=token,
        last_used_at=token.last_used_at,
        expires_at=now + settings.AGENT_API_TOKEN_CACHE_SECONDS,
    )
    if settings.AGENT_API_TOKEN_CACHE_SECONDS > 0:
        if len(_token_cache) >= _TOKEN_CACHE_PRUNE_AT:
            _token_cache.clear()  # what is still in use is read again
        _token_cache[key_hash] = cached
    return cached
