"""API keys of API clients."""

import hashlib
from datetime import datetime

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token for API clients (an API key). Only the SHA-256 of the token is stored.

    ``scopes``: ``read`` (every GET and stream) and ``write`` (what creates, acts or
    deletes), comma-separated; a key with ``write`` has ``read`` too. An expired or revoked
    key authenticates no one (docs/protocols/agui.md, Authentication)."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What the key is for.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=8, editable=False, help_text="First characters, to tell tokens apart."
    )
    scopes = models.CharField(max_length=32, default="read,write", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def scope_list(self) -> list[str]:
        return [scope for scope in self.scopes.split(",") if scope]

    def unusable_because(self, now: datetime) -> str | None:
        """Why the key authenticates no one at ``now`` (``"revoked"``, ``"expired"``), or
        ``None``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return None

    @staticmethod
    def hash_key(raw_key: str) -> str:
        return hashlib.sha256(raw_key.encode()).hexdigest()
