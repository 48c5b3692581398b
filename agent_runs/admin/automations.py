"""Automation jobs: their rules, schedules, runs, and the MCP servers page."""

from copy import copy
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from agent_runs.errors import AutomationJobInvalid, DomainError
from agent_runs.models import AutomationJob
from agent_runs.selectors.automations import automation_job_next_times, automation_job_runs
from agent_runs.services.automations import (
    automation_job_check,
    automation_job_run,
    automation_job_save,
)


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
