"""API tokens (API keys): created for a user, shown once, stored as a hash; revoked."""

import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agent_runs.authentication import api_token_forget
from agent_runs.models import ApiToken

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
