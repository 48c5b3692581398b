"""The push outbox: where clients want their tasks' updates pushed, and the deliveries."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from agent_runs.admin.common import ReadOnlyAdminMixin
from agent_runs.models import PushConfig, PushDelivery
from agent_runs.push.services import push_deliveries_retry


class PushDeliveryInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = PushDelivery
    fields = ("id", "status", "attempts", "last_status_code", "last_error", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ("-created_at",)


@admin.register(PushConfig)
class PushConfigAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Where clients want their tasks' updates pushed (docs/push.md). The secret and the
    client's token are never shown; deleting a config drops its pending deliveries."""

    list_display = ("id", "owner", "protocol", "task_ref", "url", "created_at")
    list_filter = ("protocol",)
    search_fields = ("task_ref", "url", "owner__username", "thread__id")
    fields = (
        *("id", "owner", "thread", "protocol", "task_ref", "config_ref", "url"),
        *("token_header", "created_at"),
    )
    readonly_fields = fields
    list_select_related = ("owner",)
    inlines = (PushDeliveryInline,)


@admin.register(PushDelivery)
class PushDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The push outbox: pending, delivered, or failed with its last error."""

    list_display = (
        *("id", "target", "status", "attempts", "last_status_code", "last_error"),
        *("next_attempt_at", "created_at", "delivered_at"),
    )
    list_filter = ("status", "config__protocol")
    search_fields = (
        *("id", "config__task_ref", "config__url", "config__owner__username"),
        *("profile__webhook_url", "profile__user__username"),
    )
    fields = (
        *("id", "config", "profile", "status", "attempts", "next_attempt_at"),
        *("last_status_code", "last_error", "body", "created_at", "delivered_at"),
    )
    readonly_fields = fields
    list_select_related = ("config", "profile__user")
    actions = ("retry_now",)

    @admin.display(description="to")
    def target(self, delivery: PushDelivery) -> str:
        if delivery.profile is not None:
            return f"webhook of {delivery.profile.user}"
        return str(delivery.config)

    @admin.action(description="Retry now (one more attempt)")
    def retry_now(self, request: HttpRequest, queryset: Any) -> None:
        count = push_deliveries_retry(deliveries=queryset)
        self.message_user(request, f"{count} deliveries queued for another attempt.")
