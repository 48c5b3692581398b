"""Usage shapes (docs/spec/sse-events-and-usage.md, section 5): the internal ``usage_summary`` and
the usage digest that ``TEXT_MESSAGE_END`` carries on the wire."""

from decimal import Decimal

from django.db import models
from pydantic import BaseModel, ConfigDict, Field


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


class UsageDigest(BaseModel):
    """The usage fields of ``TEXT_MESSAGE_END`` on the wire (spec 3.4). ``inputTokens``,
    ``outputTokens``, ``cost``, ``latencyMs`` and ``model`` are internal and never sent."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    total_tokens: int = Field(alias="totalTokens")
    cached_prompt_tokens: int = Field(alias="cachedPromptTokens")
    prompt_cache_hit_tokens: int = Field(alias="promptCacheHitTokens")
    prompt_cache_miss_tokens: int = Field(alias="promptCacheMissTokens")
    reasoning_tokens: int = Field(alias="reasoningTokens")
    cost_source: CostSource = Field(alias="costSource")
    usage_complete: bool = Field(alias="usageComplete")
