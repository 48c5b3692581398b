"""Threads, runs and messages for staff. History is read-only: it is what the user saw. A
run's page shows it as a timeline (agent_runs/timeline/, docs/admin.md) above its raw
events."""

import json
from copy import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from agent_runs.errors import AutomationJobInvalid, DomainError, PushUrlRefused
from agent_runs.models import (
    ApiToken,
    AutomationJob,
    CalendarEvent,
    Interrupt,
    Message,
    PushConfig,
    PushDelivery,
    Run,
    RunEvent,
    Thread,
    UserMemory,
    UserProfile,
)
from agent_runs.push.services import push_deliveries_retry, push_url_check
from agent_runs.selectors.automations import automation_job_next_times, automation_job_runs
from agent_runs.services.automations import (
    automation_job_check,
    automation_job_run,
    automation_job_save,
)
from agent_runs.services.tokens import api_tokens_revoke
from agent_runs.services.webhooks import user_webhook_set
from agent_runs.timeline import InterruptRecord, timeline_build
from billing import selectors as billing_selectors


class ReadOnlyAdminMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fields = ("seq", "role", "message_id", "content", "metadata", "visibility_mask", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("seq",)


class RawEventsFormSet(BaseInlineFormSet):
    """No form per event (a run has thousands, all read-only) and no read of its own: the
    inline's template shows the events the run page read once for its timeline
    (``raw_events``)."""

    def get_queryset(self) -> QuerySet[RunEvent]:
        return super().get_queryset().none()


class RunEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The run's AG-UI events as stored, in the order clients received them, below its
    timeline."""

    model = RunEvent
    formset = RawEventsFormSet
    template = "admin/agent_runs/run/raw_events.html"
    fields = ("id", "type", "payload", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("id",)
    verbose_name = "raw event"
    verbose_name_plural = "raw events (timeline)"


class RunInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Run
    fields = ("run_id", "status", "runtime_mode", "created_at", "started_at", "finished_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "owner", "last_seq", "created_at", "updated_at")
    list_filter = (("created_at", admin.DateFieldListFilter), "owner")
    search_fields = ("id", "owner__username")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    inlines = (RunInline,)


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # Status and date first after the run, and the long ids cut short (whole in their
    # tooltip), so that both show at a laptop's width (1280 px) beside the filters.
    list_display = (
        *("run", "status", "created_at", "duration", "runtime_mode", "job", "owner"),
        "thread_id",
    )
    list_display_links = ("run",)
    list_filter = (
        "status",
        "rolled_back",
        "runtime_mode",
        ("created_at", admin.DateFieldListFilter),
        "thread__owner",
    )
    search_fields = ("run_id", "=thread__id", "=task_id", "parent_run_id", "=automation_job")
    list_select_related = ("thread__owner",)
    date_hierarchy = "created_at"
    # The cost is in the timeline's header, from the records the timeline reads.
    readonly_fields = [field.name for field in Run._meta.fields]
    inlines = (MessageInline, RunEventInline)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Run | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(run_timeline_context(run=obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="run id", ordering="run_id")
    def run(self, run: Run) -> str:
        shown = _shortened(run.run_id, 28)
        if not run.rolled_back:
            return shown
        # Cancelled by a multitask rollback: its messages are hidden from its owner's
        # conversation, kept here.
        return format_html(
            '{} <span class="rolled-back" title="{}">(rolled back)</span>',
            shown,
            "its messages left the conversation (multitask rollback)",
        )

    @admin.display(description="automation job", ordering="automation_job")
    def job(self, run: Run) -> str:
        return _shortened(run.automation_job, 20) if run.automation_job else "-"

    @admin.display(ordering="thread__owner__username")
    def owner(self, run: Run) -> str:
        return _shortened(run.thread.owner.get_username(), 20)

    @admin.display(description="thread", ordering="thread_id")
    def thread_id(self, run: Run) -> str:
        return _shortened(str(run.thread_id), 9)

    @admin.display(description="duration (s)")
    def duration(self, run: Run) -> str:
        if run.started_at and run.finished_at:
            return f"{(run.finished_at - run.started_at).total_seconds():.3f}"
        return "-"


def _shortened(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and an ellipsis with the whole of it as a
    tooltip (a list's column stays narrow)."""
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[:limit])


@dataclass(frozen=True)
class RawEvent:
    id: int
    type: str
    payload: str  # the stored JSON
    created_at: datetime


def run_timeline_context(*, run: Run) -> dict[str, Any]:
    """The run page's timeline, its header's usage and its raw events: one query for the
    run's events, one for its model calls, however many there are."""
    events = list(RunEvent.objects.filter(run=run).order_by("id"))
    model_calls = billing_selectors.run_model_calls(run=run)
    now = timezone.now()
    timeline = timeline_build(
        events=events,
        model_calls=model_calls.records,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        now=now if run.status == Run.Status.RUNNING else None,
        interrupts=_interrupt_records(run),
        drawn_at=now,
    )
    return {
        "timeline": timeline,
        "held_run": run.continues,
        "usage": model_calls.summary,
        "cost_text": billing_selectors.usage_cost_display(model_calls.summary),
        "raw_events": [
            RawEvent(
                id=event.pk,
                type=event.type,
                payload=json.dumps(event.payload, ensure_ascii=False),
                created_at=event.created_at,
            )
            for event in events
        ],
    }


def _interrupt_records(run: Run) -> list[InterruptRecord]:
    """The interrupts the run stopped on, with the run that went on from them (one query)."""
    interrupts = Interrupt.objects.filter(run=run).select_related("answered_by")
    return [
        InterruptRecord(
            interrupt_id=interrupt.id,
            tool_name=interrupt.tool_name,
            kind=interrupt.kind,
            status=interrupt.status,
            created_at=interrupt.created_at,
            closed_at=interrupt.closed_at,
            answer=_json_or_blank(interrupt.answer),
            answered_by_pk=interrupt.answered_by_id,
            answered_by_run_id=interrupt.answered_by.run_id if interrupt.answered_by else "",
        )
        for interrupt in interrupts.order_by("created_at", "id")
    ]


def _json_or_blank(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("thread", "seq", "role", "message_id", "run", "rolled_back", "created_at")
    list_filter = (
        "role",
        "run__rolled_back",
        ("created_at", admin.DateFieldListFilter),
        "thread__owner",
    )
    search_fields = ("=thread__id", "run__run_id", "message_id")
    list_select_related = ("thread", "run")
    readonly_fields = [field.name for field in Message._meta.fields]

    @admin.display(description="rolled back", boolean=True)
    def rolled_back(self, message: Message) -> bool:
        """Its run was cancelled by a multitask ``rollback``: hidden from the conversation."""
        return message.run is not None and message.run.rolled_back


@admin.register(Interrupt)
class InterruptAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The tool calls runs stopped on, waiting for an answer: pending, answered, expired;
    by user and by tool."""

    list_display = ("id", "tool_name", "kind", "status", "thread", "run", "created_at")
    list_filter = (
        "status",
        "kind",
        "tool_name",
        ("created_at", admin.DateFieldListFilter),
        "thread__owner",
    )
    search_fields = ("=id", "=thread__id", "run__run_id", "tool_call_id")
    list_select_related = ("thread", "run")
    readonly_fields = [field.name for field in Interrupt._meta.fields]


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


class AutomationJobForm(forms.ModelForm):
    """The job's rules (a valid cron expression and IANA timezone, a prompt and an owner for
    a schedule, a valid config) as the API checks them, each error at its field."""

    class Meta:
        model = AutomationJob
        fields = (
            *("owner", "name", "description", "schedule", "timezone", "prompt"),
            *("thread_policy", "enabled", "catch_up", "multitask", "config"),
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        job = copy(self.instance)
        for name, value in cleaned.items():
            setattr(job, name, value)
        try:
            automation_job_check(job)
        except AutomationJobInvalid as invalid:
            self.add_error(invalid.field if invalid.field in self.fields else None, str(invalid))
        else:
            cleaned["schedule"] = job.schedule
        return cleaned


@admin.register(AutomationJob)
class AutomationJobAdmin(admin.ModelAdmin):
    """``config``: ``{"enabled_tools": [...], "mcp_servers": [...], "context": "..."}``, for
    every stage or per stage under its name (``{"worker": {...}}``). Its list links to the
    MCP servers page: every server the agent configs name, with its tools. A job with an
    owner may run on a schedule (docs/automations.md): its next run times are shown, ``Run
    now`` runs it at once, and its page lists its latest runs."""

    form = AutomationJobForm
    list_display = (
        *("name", "owner", "schedule", "timezone", "enabled", "next_run_at"),
        *("last_outcome", "last_outcome_at"),
    )
    list_filter = ("enabled", "thread_policy", "catch_up", "multitask")
    search_fields = ("name", "description", "owner__username")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    readonly_fields = (
        *("next_run_times", "thread", "last_run", "last_outcome", "last_outcome_at"),
        "run_history",
    )
    actions = ("run_now",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Its runs name it: the name of a saved job does not change.
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "name") if obj is not None else fields

    def save_model(self, request: HttpRequest, obj: AutomationJob, form: Any, change: bool) -> None:
        automation_job_save(job=obj)

    @admin.display(description="next run times")
    def next_run_times(self, job: AutomationJob) -> str:
        times = automation_job_next_times(job=job, count=5)
        if not times:
            return "none (no schedule, or disabled)"
        zone = ZoneInfo(job.timezone)
        return format_html_join(
            "",
            "<div>{} ({} UTC)</div>",
            ((f"{at.astimezone(zone):%Y-%m-%d %H:%M %Z}", f"{at:%Y-%m-%d %H:%M}") for at in times),
        )

    @admin.display(description="latest runs")
    def run_history(self, job: AutomationJob) -> str:
        runs = list(automation_job_runs(job=job).order_by("-created_at", "-pk")[:20])
        if not runs:
            return "no runs yet"
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:agent_runs_run_change", args=[run.pk]),
                    run.run_id,
                    run.status,
                    f"{run.created_at:%Y-%m-%d %H:%M:%S}",
                    run.thread.owner.get_username(),
                )
                for run in runs
            ),
        )
        everything = reverse("admin:agent_runs_run_changelist")
        return format_html(
            "<table><tr><th>run</th><th>status</th><th>created</th><th>owner</th></tr>{}"
            '</table><a href="{}?q={}">all its runs</a>',
            rows,
            everything,
            job.name,
        )

    @admin.action(description="Run now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: Any) -> None:
        for job in queryset:
            try:
                run = automation_job_run(job=job)
            except DomainError as refused:
                self.message_user(request, f"Job {job.name}: {refused}", messages.ERROR)
            except Http404:  # its ``same`` thread has another owner now
                self.message_user(
                    request, f"Job {job.name}: its thread is not its owner's", messages.ERROR
                )
            else:
                self.message_user(
                    request, f"Run {run.run_id} of job {job.name} queued.", messages.SUCCESS
                )

    def get_urls(self) -> list[URLPattern]:
        page = self.admin_site.admin_view(self.mcp_servers_view)
        own = [path("mcp-servers/", page, name="agent_runs_automationjob_mcp_servers")]
        return [*own, *super().get_urls()]

    def mcp_servers_view(self, request: HttpRequest) -> HttpResponse:
        """The MCP servers page (docs/tools.md): each configured server, where it is
        named, and the tools it offers (as this process last listed them)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        # The MCP client (a hundred modules) is loaded by the page that uses it, not by
        # every web process at start.
        from agent_runs.mcp_servers import mcp_servers_report, offered_tool_name

        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "MCP servers",
            "servers": [
                {
                    "configured": configured,
                    "listing": listing,
                    "tools": [
                        (offered_tool_name(configured.server, tool.name), tool.description)
                        for tool in listing.tools
                    ],
                }
                for configured, listing in mcp_servers_report(fresh=False)
            ],
        }
        return TemplateResponse(request, "admin/agent_runs/mcp_servers.html", context)


@admin.register(UserMemory)
class UserMemoryAdmin(admin.ModelAdmin):
    """What the memory stage keeps per user; staff may correct or delete an item."""

    list_display = ("owner", "kind", "content", "source_run", "created_at")
    list_filter = ("kind", "owner")
    search_fields = ("content", "owner__username")
    list_select_related = ("owner", "source_run")
    raw_id_fields = ("source_run",)


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
