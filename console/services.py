"""Writes of the console: the development demo user."""

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model


def demo_user_get_or_create() -> Any:
    """The demo user, created without a usable password (nobody can sign in as it)."""
    user, created = get_user_model().objects.get_or_create(username=settings.CONSOLE_DEMO_USERNAME)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
