"""Usage shapes (docs/spec/sse-events-and-usage.md, section 5): the usage digest that
``TEXT_MESSAGE_END`` carries on the wire; the internal ``usage_summary`` and ``CostSource``
are the run core's (``agent_runs.usage``), which its protocols read."""

from pydantic import BaseModel, ConfigDict, Field

from agent_runs.usage import CostSource, UsageSummary

__all__ = ["CostSource", "UsageDigest", "UsageSummary"]


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
