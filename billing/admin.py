"""Billing for staff: usage records (read-only), the pricing catalog with its history, and the
costs page (``/admin/billing/costs/``)."""

import csv
from collections.abc import Iterable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from billing import selectors
from billing.charts import CHART_HEIGHT, CHART_WIDTH, day_bars, share_percent
from billing.errors import format_money
from billing.models import (
    Budget,
    Costs,
    ModelDailyUsage,
    PriceCatalogEntry,
    PriceTier,
    UsageRecord,
)

MAX_PERIOD_DAYS = 731
TOP_ROWS = 100  # rows of the by-model and by-user tables on the page; the CSV has them all


class ModelIdFilter(admin.SimpleListFilter):
    """The models that have been called, from the daily totals (a DISTINCT over the records
    themselves would read a million rows)."""

    title = "model"
    parameter_name = "model_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        called = ModelDailyUsage.objects.order_by("model_id").values_list("model_id", flat=True)
        return [(model_id, model_id) for model_id in called.distinct()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(model_id=value) if value else queryset


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """One row per model call. Read-only: it is what was billed."""

    list_display = (
        "created_at",
        "model_id",
        "stage",
        "user",
        "run_link",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost_display",
        "cost_source",
        "usage_complete",
    )
    list_filter = (
        ("created_at", admin.DateFieldListFilter),
        ModelIdFilter,
        "user",
        "cost_source",
        "stage",
        ("cost", admin.EmptyFieldListFilter),
        "usage_complete",
    )
    search_fields = ("=run_ref", "=model_id", "user__username")
    list_select_related = ("user", "run")
    ordering = ("-created_at",)
    show_full_result_count = False  # a second COUNT(*) over a million rows buys nothing
    readonly_fields = [field.name for field in UsageRecord._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="run", ordering="run")
    def run_link(self, record: UsageRecord) -> str:
        if record.run_id is None:  # its thread was deleted; what was billed stays
            return f"{record.run_ref} (deleted)"
        url = reverse("admin:agent_runs_run_change", args=[record.run_id])
        return format_html('<a href="{}">{}</a>', url, record.run_ref)

    @admin.display(description="cost", ordering="cost")
    def cost_display(self, record: UsageRecord) -> str:
        if record.cost is None:
            return "unknown"
        return f"{selectors.format_cost(record.cost)} {record.currency}"


class PlainDecimalInput(forms.NumberInput):
    """Shows 0.000000028, not the database's 2.8000000E-8."""

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, Decimal):
            return selectors.format_cost(value)
        return super().format_value(value)


class PriceTierInline(admin.TabularInline):
    model = PriceTier
    extra = 0
    min_num = 1
    formfield_overrides = {models.DecimalField: {"widget": PlainDecimalInput}}


@admin.register(PriceCatalogEntry)
class PriceCatalogEntryAdmin(admin.ModelAdmin):
    """Each record keeps the entry and cost it was priced with. To change a price, give a later
    "effective from" and use "Save as new": past costs keep their entry, and the admin's
    history shows who changed what."""

    list_display = ("model_id", "currency", "effective_from", "source", "tiers_display")
    list_filter = ("currency", "source")
    search_fields = ("model_id",)
    ordering = ("model_id", "-effective_from")
    inlines = (PriceTierInline,)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    save_as = True
    save_as_continue = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[PriceCatalogEntry]:
        return super().get_queryset(request).prefetch_related("tiers")

    @admin.display(description="tiers (input / output / cached / cache write per token)")
    def tiers_display(self, entry: PriceCatalogEntry) -> str:
        return "; ".join(_tier_text(tier) for tier in entry.tiers.all())


def _tier_text(tier: PriceTier) -> str:
    prices = [
        tier.input_cost_per_token,
        tier.output_cost_per_token,
        tier.cache_hit_cost_per_token,
        tier.cache_write_cost_per_token,
    ]
    text = " / ".join("-" if price is None else selectors.format_cost(price) for price in prices)
    return f"≤{tier.max_prompt_tokens or '∞'}: {text}"


class PeriodForm(forms.Form):
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    days = forms.IntegerField(required=False, min_value=1, max_value=MAX_PERIOD_DAYS)

    def period(self) -> tuple[date, date]:
        """The chosen UTC days, both included: ``start``/``end``, else the last ``days``."""
        today = timezone.now().date()
        data = self.cleaned_data
        end = data.get("end") or today
        days = data.get("days") or settings.BILLING_COSTS_DEFAULT_DAYS
        start = data.get("start") or end - timedelta(days=days - 1)
        return start, end

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        start, end = self.period()
        if start > end:
            raise forms.ValidationError("The start must not be after the end.")
        if (end - start).days + 1 > MAX_PERIOD_DAYS:
            raise forms.ValidationError(f"Choose at most {MAX_PERIOD_DAYS} days.")
        return data


@admin.register(Costs)
class CostsAdmin(admin.ModelAdmin):
    """The costs page: totals by day, by model and by user for a period, a chart, CSV."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = PeriodForm(request.GET)  # every field is optional: no field, the default period
        if not form.is_valid():
            return self._render(request, form, None)
        start, end = form.period()
        report = selectors.costs_report(start=start, end=end)
        if request.GET.get("export") == "csv":
            return _csv_response(report)
        return self._render(request, form, report)

    def _render(
        self, request: HttpRequest, form: PeriodForm, report: selectors.CostsReport | None
    ) -> TemplateResponse:
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Costs",
            "form": form,
            "report": report,
        }
        if report is not None:
            csv_query = request.GET.copy()
            csv_query["export"] = "csv"
            context.update(_report_context(report), csv_query=csv_query.urlencode())
        return TemplateResponse(request, "admin/billing/costs.html", context)


def _budgets_of(usernames: Iterable[str]) -> dict[str, str]:
    """Each listed user's own limits, as the page shows them beside their spend (``1.50 a
    day · 20.00 a month``); users without a budget of their own are left out."""
    shown: dict[str, str] = {}
    budgets = Budget.objects.filter(user__username__in=list(usernames)).select_related("user")
    for budget in budgets:
        limits = [
            f"{format_money(limit)} a {period}"
            for limit, period in ((budget.daily_limit, "day"), (budget.monthly_limit, "month"))
            if limit is not None
        ]
        shown[budget.user.get_username()] = " · ".join(limits)
    return shown


def _report_context(report: selectors.CostsReport) -> dict[str, Any]:
    chart_currency = report.totals[0].currency if report.totals else ""
    highest_model = max((row.cost for row in report.by_model), default=Decimal(0))
    highest_user = max((row.cost for row in report.by_user), default=Decimal(0))
    bars = day_bars(report.by_day, start=report.start, end=report.end, currency=chart_currency)
    shown_users = report.by_user[:TOP_ROWS]
    budgets = _budgets_of(row.key for row in shown_users)
    return {
        "chart_currency": chart_currency,
        "chart_highest": max((bar.cost for bar in bars), default=Decimal(0)),
        "bars": bars,
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "by_model": [(row, share_percent(row.cost, highest_model)) for row in report.by_model][
            :TOP_ROWS
        ],
        "by_user": [
            (row, share_percent(row.cost, highest_user), budgets.get(row.key, ""))
            for row in shown_users
        ],
        "more_models": max(len(report.by_model) - TOP_ROWS, 0),
        "more_users": max(len(report.by_user) - TOP_ROWS, 0),
    }


def _csv_response(report: selectors.CostsReport) -> HttpResponse:
    name = f"costs-{report.start.isoformat()}-{report.end.isoformat()}.csv"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(["group", "key", "currency", "calls", "total_tokens", "cost", "unpriced_calls"])
    sections = [
        ("total", report.totals),
        ("day", report.by_day),
        ("model", report.by_model),
        ("user", report.by_user),
    ]
    for group, rows in sections:
        for row in rows:
            writer.writerow(
                [
                    group,
                    row.key,
                    row.currency,
                    row.calls,
                    row.total_tokens,
                    selectors.format_cost(row.cost),
                    row.unpriced_calls,
                ]
            )
    return response


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Each user's spending limits (empty: none of that period), in the catalog's currency;
    the day and month are the user's own (docs/billing.md, "Budgets")."""

    list_display = ("user", "daily_limit", "monthly_limit", "updated_at")
    search_fields = ("user__username",)
    autocomplete_fields = ("user",)
    readonly_fields = ("updated_at",)
