from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from attachments.models import Attachment


@admin.register(Attachment)
class AttachmentAdmin(admin.ModelAdmin):
    """Read-only: an object and its row are written together by ``attachment_upload`` and
    removed together by ``attachment_delete``, never one without the other."""

    list_display = ("__str__", "owner", "mime_type", "size", "created_at")
    list_filter = ("bucket", "mime_type")
    search_fields = ("path", "owner__username")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
