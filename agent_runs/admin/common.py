"""What the admin's pages share: read-only pages and short columns."""

from typing import Any

from django.http import HttpRequest
from django.utils.html import format_html


class ReadOnlyAdminMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def shortened(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and an ellipsis with the whole of it as a
    tooltip (a list's column stays narrow)."""
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[:limit])
