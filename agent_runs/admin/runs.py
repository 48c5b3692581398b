"""Threads, runs, messages and interrupts. History is read-only: it is what the user saw. A
run's page shows it as a timeline (agent_runs/timeline/, docs/admin.md) above its raw
events."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html

from agent_runs import ports
from agent_runs.admin.common import ReadOnlyAdminMixin, shortened
from agent_runs.models import Interrupt, Message, Run, RunEvent, Thread
from agent_runs.timeline import InterruptRecord, timeline_build


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
        shown = shortened(run.run_id, 28)
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
        return shortened(run.automation_job, 20) if run.automation_job else "-"

    @admin.display(ordering="thread__owner__username")
    def owner(self, run: Run) -> str:
        return shortened(run.thread.owner.get_username(), 20)

    @admin.display(description="thread", ordering="thread_id")
    def thread_id(self, run: Run) -> str:
        return shortened(str(run.thread_id), 9)

    @admin.display(description="duration (s)")
    def duration(self, run: Run) -> str:
        if run.started_at and run.finished_at:
            return f"{(run.finished_at - run.started_at).total_seconds():.3f}"
        return "-"


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
    billing = ports.billing()
    model_calls = billing.run_model_calls(run=run)
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
        "cost_text": billing.usage_cost_display(model_calls.summary),
        "raw_events": _raw_events(events),
    }


def _raw_events(events: list[RunEvent]) -> list[RawEvent]:
    return [
        RawEvent(
            id=event.pk,
            type=event.type,
            payload=json.dumps(event.payload, ensure_ascii=False),
            created_at=event.created_at,
        )
        for event in events
    ]


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
