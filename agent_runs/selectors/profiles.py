"""The one reader of a user's profile settings (``UserProfile.settings``)."""

from typing import Any
from zoneinfo import ZoneInfo

from django.db import connection

from agent_runs.db import json_column
from agent_runs.models import UserProfile
from agent_runs.run_input import iana_timezones


def user_profile_settings(*, user_id: Any) -> dict[str, Any]:
    """The user's profile settings ({} when the user has no profile)."""
    # A statement of constant text: every run's answer reads it (the user's locale).
    with connection.cursor() as cursor:
        cursor.execute(_PROFILE_SETTINGS, [user_id])
        row = cursor.fetchone()
    found = None if row is None else json_column(row[0])
    return found if isinstance(found, dict) else {}


_PROFILE_SETTINGS = f"SELECT settings FROM {UserProfile._meta.db_table} WHERE user_id = %s"


def user_timezone(profile_settings: dict[str, Any]) -> ZoneInfo | None:
    """The IANA zone of the settings (``timezone``), or ``None`` when unset or unknown."""
    zone = profile_settings.get("timezone")
    return ZoneInfo(zone) if isinstance(zone, str) and zone in iana_timezones() else None


def user_locale(profile_settings: dict[str, Any]) -> str:
    """The locale for compiled UI (``locale``, else "en")."""
    locale = profile_settings.get("locale")
    return locale if isinstance(locale, str) and locale else "en"
