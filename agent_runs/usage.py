"""A run's usage and spending as the run core and its protocols read them, whichever app
records and prices the calls (billing, through ``agent_runs.ports``): the ``usage_summary``
shape (docs/spec/sse-events-and-usage.md, section 5), a user's limits and the error that
stops a run at one. Billing imports these from here; nothing here reads the database."""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import models
from pydantic import BaseModel, ConfigDict, Field

from agent_runs.errors import DomainError


class CostSource(models.TextChoices):
    """Where a cost came from (spec 5.6), exactly the spec's four values."""

    PROVIDER = "provider"
    CATALOG_FALLBACK = "catalog_fallback"
    CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST = "catalog_fallback_incomplete_provider_cost"
    INCOMPLETE_USAGE_FALLBACK = "incomplete_usage_fallback"


class UsageSummary(BaseModel):
    """A run's normalised usage (spec 5.3) and its cost decision (spec 5.4-5.6).

    The spec's fields come first; ``usage_complete``, ``cost``, ``currency`` and
    ``unpriced_calls`` are this implementation's additions: ``cost`` is ``None`` (unknown, never
    a silent zero) when a call it needs has no catalog price.
    """

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    latency_ms: int = 0
    cached_prompt_tokens: int = 0
    prompt_cache_hit_tokens: int = 0
    prompt_cache_miss_tokens: int = 0
    reasoning_tokens: int = 0
    direct_cost: Decimal | None = None
    direct_cost_observed: int = Field(default=0, ge=0, le=1)
    direct_cost_complete: int = Field(default=0, ge=0, le=1)
    model_call_records: int = 0
    usage_records: int = 0
    direct_cost_records: int = 0
    cost_source: CostSource = CostSource.CATALOG_FALLBACK
    usage_complete: bool = True
    cost: Decimal | None = Decimal(0)
    currency: str = ""
    unpriced_calls: int = 0


@dataclass(frozen=True)
class RunUsageByModel:
    """A run's usage summary for each model it called (in the order of their first call),
    and for the whole run."""

    models: list[tuple[str, UsageSummary]]
    run: UsageSummary


@dataclass(frozen=True)
class RunModelCalls:
    """A run's model calls (its usage records, in the order they were recorded: each a
    ``timeline.shapes.ModelCallRecord``) and their ``usage_summary`` and cost."""

    records: list[Any]
    summary: UsageSummary


def format_cost(cost: Decimal) -> str:
    """A cost without trailing zeros or exponent: ``0.000123``."""
    text = f"{cost.normalize():f}"
    return text if text != "-0" else "0"


def format_money(amount: Decimal) -> str:
    """A limit as people write it: at least two decimals, no trailing zeros beyond them."""
    text = format(amount.normalize(), "f")
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(2, '0')}"


@dataclass(frozen=True)
class Limits:
    """A user's limits (``None``: no limit of that period)."""

    daily: Decimal | None
    monthly: Decimal | None

    @property
    def any(self) -> bool:
        return self.daily is not None or self.monthly is not None


class BudgetExceeded(DomainError):
    """A limit of the caller's budget is reached: no run starts, and a run in progress
    makes no further model call. Every protocol renders it in its own shape (by ``status``;
    OpenAI Responses answers a ``budget_exceeded`` as the quota error its SDK knows)."""

    code = "budget_exceeded"
    status = 402

    def __init__(self, *, period: str, limit: Decimal, currency: str) -> None:
        self.period = period
        name = "daily" if period == "day" else "monthly"
        super().__init__(
            f"budget exceeded: the {name} limit of {format_money(limit)} {currency} is reached"
        )
