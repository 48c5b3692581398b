"""Usage records (one per model call) and the pricing catalog
(docs/spec/sse-events-and-usage.md, section 5)."""

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from agent_runs.models import Run, Stage
from billing.limits_kept import limits_forget
from billing.schemas import CostSource

# Per-token prices such as 0.00000027, and costs down to a single token at them, exactly.
PRICE_DIGITS = 24
COST_DIGITS = 30
DECIMAL_PLACES = 15


class PriceCatalogEntry(models.Model):
    """A model's price from ``effective_from`` on. A price change adds an entry with a later
    ``effective_from``; each usage record keeps the entry and the cost it was priced with, so
    no change here rewrites a past cost."""

    model_id = models.CharField(
        max_length=200, help_text="provider/model, e.g. deepseek/deepseek-chat"
    )
    currency = models.CharField(max_length=3, default="USD")
    source = models.CharField(
        max_length=200, help_text="Where the price comes from: litellm, a file's name, admin."
    )
    source_url = models.URLField(max_length=500, blank=True)
    effective_from = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "price catalog entry"
        verbose_name_plural = "price catalog"
        constraints = [
            models.UniqueConstraint(
                fields=["model_id", "effective_from"], name="price_entry_unique_model_from"
            )
        ]
        indexes = [
            models.Index(fields=["model_id", "-effective_from"], name="price_entry_model_recent")
        ]

    def __str__(self) -> str:
        return f"{self.model_id} from {self.effective_from:%Y-%m-%d %H:%M} ({self.currency})"


class PriceTier(models.Model):
    """A tier of a catalog entry (spec 5.5): it prices calls whose prompt has at most
    ``max_prompt_tokens`` tokens (empty: any number), the smallest fitting tier first."""

    entry = models.ForeignKey(PriceCatalogEntry, on_delete=models.CASCADE, related_name="tiers")
    max_prompt_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Empty: no upper bound."
    )
    input_cost_per_token = models.DecimalField(
        max_digits=PRICE_DIGITS, decimal_places=DECIMAL_PLACES
    )
    output_cost_per_token = models.DecimalField(
        max_digits=PRICE_DIGITS, decimal_places=DECIMAL_PLACES
    )
    cache_hit_cost_per_token = models.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=DECIMAL_PLACES,
        null=True,
        blank=True,
        help_text="Price of a cached prompt token; empty or 0: the input price.",
    )
    cache_write_cost_per_token = models.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=DECIMAL_PLACES,
        null=True,
        blank=True,
        help_text=(
            "Price of a prompt token written to the provider's cache (Anthropic's cache "
            "creation); empty or 0: the input price."
        ),
    )

    class Meta:
        constraints = [
            # Two unbounded tiers (NULL) are not caught here: NULLS NOT DISTINCT needs
            # PostgreSQL 15 and is not on SQLite; catalog files are checked for it instead.
            models.UniqueConstraint(
                fields=["entry", "max_prompt_tokens"], name="price_tier_unique_bound"
            )
        ]
        ordering = [models.F("max_prompt_tokens").asc(nulls_last=True)]

    def __str__(self) -> str:
        bound = "∞" if self.max_prompt_tokens is None else self.max_prompt_tokens
        return f"≤ {bound} prompt tokens"


class UsageRecord(models.Model):
    """One model call's normalised usage and cost (spec 5.2-5.6). ``cost`` is empty when it is
    unknown (no catalog price), never a silent zero."""

    CostSource = CostSource
    Stage = Stage

    # Empty once the run's thread is deleted: what was billed stays (costs never change after
    # the fact), and ``thread_ref`` / ``run_ref`` still name the run it was billed for.
    run = models.ForeignKey(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_records"
    )
    thread_ref = models.UUIDField(null=True, blank=True, help_text="The run's threadId.")
    run_ref = models.CharField(max_length=128, blank=True, help_text="The run's runId.")
    # The run's owner, copied so costs per user need no join through runs and threads.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="usage_records",
        db_index=False,  # covered by usage_user_created
    )
    stage = models.CharField(max_length=32, choices=Stage.choices)
    model_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # Empty: the provider did not report it.
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_prompt_tokens = models.PositiveIntegerField(default=0)
    prompt_cache_hit_tokens = models.PositiveIntegerField(default=0)
    prompt_cache_miss_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    usage_complete = models.BooleanField(
        help_text="The provider reported both prompt and completion tokens."
    )
    direct_cost = models.DecimalField(
        max_digits=COST_DIGITS,
        decimal_places=DECIMAL_PLACES,
        null=True,
        blank=True,
        help_text="The provider's own cost, if it sent one.",
    )
    catalog_cost = models.DecimalField(
        max_digits=COST_DIGITS,
        decimal_places=DECIMAL_PLACES,
        null=True,
        blank=True,
        help_text="Empty: the model has no catalog price.",
    )
    cost = models.DecimalField(
        max_digits=COST_DIGITS,
        decimal_places=DECIMAL_PLACES,
        null=True,
        blank=True,
        help_text="Empty: unknown.",
    )
    currency = models.CharField(max_length=3)
    cost_source = models.CharField(max_length=48, choices=CostSource.choices)
    price_entry = models.ForeignKey(
        PriceCatalogEntry,
        on_delete=models.PROTECT,  # the price a recorded cost was computed with stays
        null=True,
        blank=True,
        related_name="usage_records",
    )
    usage = models.JSONField(default=dict, blank=True, help_text="The direct usage fields.")
    metadata = models.JSONField(default=dict, blank=True, help_text="The provider's raw usage.")

    class Meta:
        indexes = [
            # The admin's list and date filter; the costs page reads the daily totals.
            models.Index(fields=["-created_at"], name="usage_created"),
            models.Index(fields=["user", "created_at"], name="usage_user_created"),
            models.Index(fields=["model_id", "created_at"], name="usage_model_created"),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} · {self.stage} · run {self.run_ref}"


class DailyUsage(models.Model):
    """Usage totals of one UTC day, kept up to date by ``usage_record`` in the same
    transaction as the record, so the costs page sums a few thousand rows instead of a
    million records. ``cost`` sums the known costs; ``calls - priced_calls`` were unpriced."""

    day = models.DateField()
    currency = models.CharField(max_length=3)
    calls = models.PositiveBigIntegerField(default=0)
    priced_calls = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=COST_DIGITS, decimal_places=DECIMAL_PLACES, default=0)

    class Meta:
        abstract = True


class ModelDailyUsage(DailyUsage):
    """A day's usage of one model: the costs page's totals, days and models."""

    model_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "model_id", "currency"], name="model_daily_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.model_id}"


class UserDailyUsage(DailyUsage):
    """A day's usage of one user: the costs page's users."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="daily_usage",
        db_index=False,  # covered by user_daily_user_day
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "user", "currency"], name="user_daily_unique")
        ]
        indexes = [models.Index(fields=["user", "day"], name="user_daily_user_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.user_id}"


class Costs(UsageRecord):
    """The admin's costs page, ``/admin/billing/costs/``: usage totalled by day, model and
    user. A proxy so the page sits in the admin's index with its own view permission."""

    class Meta:
        proxy = True
        verbose_name = "costs"
        verbose_name_plural = "costs"
        default_permissions = ("view",)


class Budget(models.Model):
    """A user's limits on spending, in the pricing catalog's currency, per day and per
    month of the user's own timezone (docs/billing.md, "Budgets"). Empty: no limit of that
    period (``BUDGET_DEFAULT_DAILY`` / ``BUDGET_DEFAULT_MONTHLY`` apply to users without a
    budget of their own)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget"
    )
    daily_limit = models.DecimalField(
        max_digits=COST_DIGITS, decimal_places=DECIMAL_PLACES, null=True, blank=True
    )
    monthly_limit = models.DecimalField(
        max_digits=COST_DIGITS, decimal_places=DECIMAL_PLACES, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(daily_limit__isnull=True) | models.Q(daily_limit__gte=0),
                name="budget_daily_not_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(monthly_limit__isnull=True) | models.Q(monthly_limit__gte=0),
                name="budget_monthly_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"budget of {self.user_id}"

    # Saved or deleted here, the user's limits are read anew at once in this process
    # (billing/budgets.py keeps them a few seconds).
    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        limits_forget(user_id=self.user_id)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        deleted = super().delete(*args, **kwargs)
        limits_forget(user_id=self.user_id)
        return deleted
