from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from attachments import services
from attachments.models import Attachment


@admin.register(Attachment)
class AttachmentAdmin(admin.ModelAdmin):
    """Read-only but for deleting: an object and its row are written together by
    ``attachment_upload`` and removed together by ``attachment_delete`` (which the admin's
    delete, of one row or of a selection, goes through), never one without the other."""

    list_display = ("__str__", "owner", "mime_type", "size", "created_at")
    list_filter = ("bucket", "mime_type")
    search_fields = ("path", "owner__username")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: Attachment) -> None:
        services.attachment_delete(attachment=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Attachment]) -> None:
        # All the rows or none; the objects go once the rows' deletion commits.
        with transaction.atomic():
            for attachment in queryset:
                services.attachment_delete(attachment=attachment)
