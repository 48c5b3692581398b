"""Users' API keys, profiles (timezone, webhook), calendar events and memories."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from agent_runs.errors import PushUrlRefused
from agent_runs.models import ApiToken, CalendarEvent, UserMemory, UserProfile
from agent_runs.push.services import push_url_check
from agent_runs.services.tokens import api_tokens_revoke
from agent_runs.services.webhooks import user_webhook_set


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API keys: listed, renamed and revoked here (``Revoke``, an action), never shown."""

    list_display = (
        "name",
        "prefix",
        "user",
        "scopes",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ("scopes", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("user__username", "prefix", "name")
    readonly_fields = ("prefix", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_select_related = ("user",)
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Tokens are made by `manage.py create_api_token`, which shows the key once.
        return False

    @admin.action(description="Revoke the selected API keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        count = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"{count} API key(s) revoked.", messages.SUCCESS)


class UserProfileForm(forms.ModelForm):
    """The webhook URL is checked as a push URL (docs/push.md, "Push URLs"); a blank secret
    keeps the profile's own, or is generated when the URL is set."""

    webhook_url = forms.URLField(
        required=False,
        max_length=2048,
        assume_scheme="https",
        help_text="Told when one of the user's runs stops on an interrupt "
        "(interrupt.opened, docs/push.md). Blank: no webhook.",
    )

    class Meta:
        model = UserProfile
        fields = ("user", "settings", "webhook_url", "webhook_secret")
        help_texts = {
            "webhook_secret": "Signs each delivery (X-Push-Signature). Blank: keep the "
            "current one, or generate one.",
        }

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data["webhook_url"]
        if url:
            try:
                push_url_check(url)
            except PushUrlRefused as refused:
                raise forms.ValidationError(str(refused)) from None
        return url


@admin.register(UserProfile)
class UserProfileAdmin(admin.ModelAdmin):
    """``settings["timezone"]`` is the user's zone for calendar tools (after the tool's own
    and the device's); ``webhook_url`` the user's own webhook (docs/push.md)."""

    form = UserProfileForm
    list_display = ("user", "settings", "webhook_url")
    search_fields = ("user__username", "webhook_url")
    list_select_related = ("user",)

    def save_model(self, request: HttpRequest, obj: UserProfile, form: Any, change: bool) -> None:
        # The webhook through its service (a blank secret keeps the stored one, or makes one).
        url, secret = obj.webhook_url, obj.webhook_secret
        obj.webhook_secret = form.initial.get("webhook_secret", "")
        super().save_model(request, obj, form, change)
        user_webhook_set(profile=obj, url=url, secret=secret)


@admin.register(CalendarEvent)
class CalendarEventAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "starts_at", "event_timezone", "run")
    list_filter = (("starts_at", admin.DateFieldListFilter), "event_timezone")
    search_fields = ("title", "owner__username")
    list_select_related = ("owner", "run")


@admin.register(UserMemory)
class UserMemoryAdmin(admin.ModelAdmin):
    """What the memory stage keeps per user; staff may correct or delete an item."""

    list_display = ("owner", "kind", "content", "source_run", "created_at")
    list_filter = ("kind", "owner")
    search_fields = ("content", "owner__username")
    list_select_related = ("owner", "source_run")
    raw_id_fields = ("source_run",)
