"""API tokens: created for a user, shown once, stored as a hash."""

import secrets

from django.contrib.auth import get_user_model
from django.db import transaction

from agent_runs.models import ApiToken


@transaction.atomic
def api_token_create(*, username: str) -> str:
    """Create the user if missing and a new API token for it; return the raw token, which
    is shown once and stored only as a hash."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    raw_key = secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, key_hash=ApiToken.hash_key(raw_key), prefix=raw_key[:8])
    return raw_key
