"""The cost rules of docs/spec/sse-events-and-usage.md 5.2-5.6, without a database. Every
expectation is computed by hand in the comment above it."""

from decimal import Decimal

from billing.pricing import (
    CallUsage,
    Price,
    PricedCall,
    PriceTier,
    catalog_cost,
    cost_source_for,
    normalise_usage,
    price_call,
    summarise,
    tier_for,
    usage_digest,
)
from billing.schemas import CostSource

DEEPSEEK_CHAT = Price(
    "USD", (PriceTier(None, Decimal("0.00000028"), Decimal("0.00000042"), Decimal("0.000000028")),)
)
QWEN_PLUS = Price("USD", (PriceTier(None, Decimal("0.0000004"), Decimal("0.0000012")),))
QWEN3_MAX = Price(
    "USD",
    (
        PriceTier(None, Decimal("0.000003"), Decimal("0.000015")),
        PriceTier(32_000, Decimal("0.0000012"), Decimal("0.000006")),
        PriceTier(128_000, Decimal("0.0000024"), Decimal("0.000012")),
    ),
)

# DeepSeek (spec 5.7): no top-level total, cache counts in the raw usage.
DEEPSEEK_USAGE = {"input_tokens": 1200, "output_tokens": 300, "time": 2.5}
DEEPSEEK_METADATA = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "prompt_cache_hit_tokens": 1024,
    "prompt_cache_miss_tokens": 176,
}
# DashScope (spec 5.7): reasoning tokens inside the completion tokens.
DASHSCOPE_USAGE = {"input_tokens": 2000, "output_tokens": 800, "time": 4.0}
DASHSCOPE_METADATA = {
    "prompt_tokens": 2000,
    "completion_tokens": 800,
    "total_tokens": 2800,
    "completion_tokens_details": {"reasoning_tokens": 600},
}


def priced(usage: dict, metadata: dict, price: Price | None = DEEPSEEK_CHAT) -> PricedCall:
    return price_call(normalise_usage(usage, metadata), price, default_currency="USD")


# 5.2 normalisation ---------------------------------------------------------------------------


def test_it_reads_a_deepseek_call_with_cache_hits():
    call = normalise_usage(DEEPSEEK_USAGE, DEEPSEEK_METADATA)
    assert call == CallUsage(
        input_tokens=1200,
        output_tokens=300,
        total_tokens=1500,
        latency_ms=2500,
        cached_prompt_tokens=1024,
        prompt_cache_hit_tokens=1024,
        prompt_cache_miss_tokens=176,
        reasoning_tokens=0,
        direct_cost=None,
    )
    assert call.usage_complete


def test_it_reads_dashscope_reasoning_tokens_and_a_null_as_zero():
    assert normalise_usage(DASHSCOPE_USAGE, DASHSCOPE_METADATA).reasoning_tokens == 600
    null_reasoning = {**DASHSCOPE_METADATA, "completion_tokens_details": {"reasoning_tokens": None}}
    assert normalise_usage(DASHSCOPE_USAGE, null_reasoning).reasoning_tokens == 0


def test_direct_fields_win_over_the_raw_usage():
    call = normalise_usage(
        {"input_tokens": 10, "output_tokens": 5, "total_tokens": 16, "cost": "0.5"},
        {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19, "cost": 0.9},
    )
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (10, 5, 16)
    assert call.direct_cost == Decimal("0.5")


def test_the_raw_usage_fills_what_the_direct_fields_lack():
    call = normalise_usage({"time": 1.0}, {"prompt_tokens": 12, "completion_tokens": 7})
    # No total anywhere: prompt + completion.
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (12, 7, 19)
    assert (
        normalise_usage(
            {}, {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 4}
        ).total_tokens
        == 4
    )


def test_direct_cost_falls_back_to_cost_then_total_cost_in_the_raw_usage():
    assert normalise_usage({}, {"cost": "0.25", "total_cost": 0.5}).direct_cost == Decimal("0.25")
    assert normalise_usage({}, {"total_cost": 0.5}).direct_cost == Decimal("0.5")


def test_an_invalid_direct_cost_is_no_direct_cost():
    for bad in (-0.01, "abc", float("nan"), float("inf"), True, {"amount": 1}):
        assert normalise_usage({"cost": bad}, {}).direct_cost is None, bad


def test_latency_is_the_time_in_milliseconds_rounded_half_up():
    assert normalise_usage({"time": 1.2345}, {}).latency_ms == 1235
    assert normalise_usage({}, {}).latency_ms is None


def test_cached_tokens_come_from_the_details_then_the_hit_count_then_agentscope():
    assert (
        normalise_usage(
            {"input_tokens": 900}, {"prompt_cache_hit_tokens": 300}
        ).cached_prompt_tokens
        == 300
    )
    agentscope_only = normalise_usage({"input_tokens": 900, "cache_input_tokens": 200}, {})
    assert agentscope_only.cached_prompt_tokens == 200
    # More cached than sent is clipped to the prompt.
    assert (
        normalise_usage(
            {"input_tokens": 100}, {"prompt_cache_hit_tokens": 300}
        ).cached_prompt_tokens
        == 100
    )


def test_a_call_without_token_counts_is_not_a_usage_record():
    assert not normalise_usage({"time": 1}, {}).usage_complete
    assert not normalise_usage({"input_tokens": 5}, {}).usage_complete


def test_it_reads_an_anthropic_call_with_cache_reads_and_writes():
    # The runtime's direct fields: input_tokens is the whole prompt (25 + 100 read + 20
    # written); the raw usage is Anthropic's, whose input_tokens leaves the cache out.
    usage = {
        "input_tokens": 145,
        "output_tokens": 15,
        "time": 0.5,
        "cache_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    metadata = {
        "input_tokens": 25,
        "output_tokens": 15,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    call = normalise_usage(usage, metadata)
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (145, 15, 160)
    assert (call.cached_prompt_tokens, call.cache_write_tokens) == (100, 20)


def test_it_reads_gemini_thoughts_as_reasoning_tokens():
    usage = {"input_tokens": 120, "output_tokens": 16, "time": 0.2, "cache_input_tokens": 100}
    metadata = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 10,
        "thoughtsTokenCount": 6,
        "cachedContentTokenCount": 100,
        "totalTokenCount": 136,
    }
    call = normalise_usage(usage, metadata)
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (120, 16, 136)
    assert (call.cached_prompt_tokens, call.reasoning_tokens) == (100, 6)


def test_it_reads_an_ollama_call():
    usage = {"input_tokens": 42, "output_tokens": 9, "time": 0.1}
    call = normalise_usage(usage, {"prompt_eval_count": 42, "eval_count": 9})
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (42, 9, 51)
    assert call.usage_complete


# 5.5 catalog fallback ------------------------------------------------------------------------


def test_deepseek_with_cache_hits_costs_the_cached_tokens_at_the_cache_rate():
    # 176 * 0.00000028 + 1024 * 0.000000028 + 300 * 0.00000042
    # = 0.00004928 + 0.000028672 + 0.000126 = 0.000203952
    call = normalise_usage(DEEPSEEK_USAGE, DEEPSEEK_METADATA)
    assert catalog_cost(call, DEEPSEEK_CHAT) == Decimal("0.000203952")


def test_dashscope_reasoning_tokens_are_priced_as_completion_tokens():
    # 2000 * 0.0000004 + 800 * 0.0000012 = 0.0008 + 0.00096 = 0.00176
    call = normalise_usage(DASHSCOPE_USAGE, DASHSCOPE_METADATA)
    assert catalog_cost(call, QWEN_PLUS) == Decimal("0.00176")


def test_without_a_cache_rate_cached_tokens_cost_the_input_rate():
    # Same as uncached: 2000 * 0.0000004 + 800 * 0.0000012 = 0.00176
    cached = {**DASHSCOPE_METADATA, "prompt_tokens_details": {"cached_tokens": 500}}
    call = normalise_usage(DASHSCOPE_USAGE, cached)
    assert call.cached_prompt_tokens == 500
    assert catalog_cost(call, QWEN_PLUS) == Decimal("0.00176")
    # A cache rate of 0 is "not configured", not free.
    zero = Price("USD", (PriceTier(None, Decimal("0.0000004"), Decimal("0.0000012"), Decimal(0)),))
    assert catalog_cost(call, zero) == Decimal("0.00176")


def test_the_tier_is_chosen_by_prompt_tokens_up_to_and_including_its_bound():
    assert tier_for(QWEN3_MAX.tiers, 32_000) == QWEN3_MAX.tiers[1]
    assert tier_for(QWEN3_MAX.tiers, 32_001) == QWEN3_MAX.tiers[2]
    assert tier_for(QWEN3_MAX.tiers, 128_001) == QWEN3_MAX.tiers[0]
    assert tier_for((PriceTier(10, Decimal(1), Decimal(1)),), 11) is None


def test_tiered_qwen_pricing_uses_the_rates_of_the_prompts_tier():
    def cost(prompt: int) -> Decimal | None:
        return catalog_cost(CallUsage(input_tokens=prompt, output_tokens=1000), QWEN3_MAX)

    # 32000 * 0.0000012 + 1000 * 0.000006 = 0.0384 + 0.006 = 0.0444
    assert cost(32_000) == Decimal("0.0444")
    # 32001 * 0.0000024 + 1000 * 0.000012 = 0.0768024 + 0.012 = 0.0888024
    assert cost(32_001) == Decimal("0.0888024")
    # 200000 * 0.000003 + 1000 * 0.000015 = 0.6 + 0.015 = 0.615
    assert cost(200_000) == Decimal("0.615")


def test_a_model_without_a_price_has_an_unknown_cost_not_zero():
    call = normalise_usage(DEEPSEEK_USAGE, DEEPSEEK_METADATA)
    assert catalog_cost(call, None) is None
    bounded = Price("USD", (PriceTier(1000, Decimal(1), Decimal(1)),))
    assert catalog_cost(call, bounded) is None  # 1200 prompt tokens fit no tier


# 5.4 / 5.6 the decision ------------------------------------------------------------------------


def decide(
    usage_complete: bool = True,
    observed: bool = True,
    complete: bool = True,
    direct_cost: Decimal | None = Decimal("0.1"),
) -> CostSource:
    return cost_source_for(
        usage_complete=usage_complete,
        direct_cost_observed=observed,
        direct_cost_complete=complete,
        direct_cost=direct_cost,
    )


def test_the_provider_cost_is_used_only_when_all_four_conditions_hold():
    assert decide() == CostSource.PROVIDER
    assert decide(usage_complete=False) == CostSource.INCOMPLETE_USAGE_FALLBACK
    assert decide(complete=False) == CostSource.CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST
    assert decide(direct_cost=Decimal(-1)) == CostSource.CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST
    assert decide(direct_cost=Decimal("NaN")) == (
        CostSource.CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST
    )
    assert decide(observed=False, complete=False, direct_cost=None) == CostSource.CATALOG_FALLBACK


def test_a_complete_provider_cost_is_the_runs_cost():
    # 0.0012 + 0.0008 = 0.0020, whatever the catalog says.
    summary = summarise(
        [
            priced({**DEEPSEEK_USAGE, "cost": "0.0012"}, DEEPSEEK_METADATA),
            priced(DEEPSEEK_USAGE, {**DEEPSEEK_METADATA, "total_cost": 0.0008}),
        ]
    )
    assert summary.cost_source == CostSource.PROVIDER
    assert summary.cost == Decimal("0.0020")
    assert summary.direct_cost == Decimal("0.0020")
    assert (summary.direct_cost_observed, summary.direct_cost_complete) == (1, 1)
    assert (summary.model_call_records, summary.usage_records, summary.direct_cost_records) == (
        2,
        2,
        2,
    )


def test_a_zero_provider_cost_is_a_valid_provider_cost():
    summary = summarise([priced({**DEEPSEEK_USAGE, "cost": 0}, DEEPSEEK_METADATA)])
    assert summary.cost_source == CostSource.PROVIDER
    assert summary.cost == Decimal(0)


def test_an_incomplete_provider_cost_falls_back_to_the_catalog_for_every_call():
    # Two DeepSeek calls at the catalog: 2 * 0.000203952 = 0.000407904; the provider's
    # 0.0012 for one of them is reported but not used.
    summary = summarise(
        [
            priced({**DEEPSEEK_USAGE, "cost": "0.0012"}, DEEPSEEK_METADATA),
            priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA),
        ]
    )
    assert summary.cost_source == CostSource.CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST
    assert summary.cost == Decimal("0.000407904")
    assert summary.direct_cost == Decimal("0.0012")
    assert (summary.direct_cost_observed, summary.direct_cost_complete) == (1, 0)
    assert summary.direct_cost_records == 1


def test_incomplete_usage_falls_back_to_the_catalog_with_what_was_reported():
    # DeepSeek 0.000203952 + a call that reported nothing (0) = 0.000203952.
    summary = summarise([priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA), priced({"time": 3}, {})])
    assert summary.cost_source == CostSource.INCOMPLETE_USAGE_FALLBACK
    assert summary.cost == Decimal("0.000203952")
    assert not summary.usage_complete
    assert (summary.model_call_records, summary.usage_records) == (2, 1)
    assert summary.latency_ms == 5500


def test_incomplete_usage_wins_over_a_complete_provider_cost():
    summary = summarise(
        [
            priced({**DEEPSEEK_USAGE, "cost": "0.001"}, DEEPSEEK_METADATA),
            priced({"cost": "0.002"}, {}),
        ]
    )
    assert summary.direct_cost_complete == 1
    assert summary.cost_source == CostSource.INCOMPLETE_USAGE_FALLBACK
    assert summary.cost == Decimal("0.000203952")


def test_catalog_fallback_sums_deepseek_and_dashscope_calls():
    # 0.000203952 + 0.00176 = 0.001963952
    summary = summarise(
        [
            priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA),
            priced(DASHSCOPE_USAGE, DASHSCOPE_METADATA, QWEN_PLUS),
        ]
    )
    assert summary.cost_source == CostSource.CATALOG_FALLBACK
    assert summary.cost == Decimal("0.001963952")
    assert summary.currency == "USD"
    assert (summary.input_tokens, summary.output_tokens, summary.total_tokens) == (3200, 1100, 4300)
    assert (summary.cached_prompt_tokens, summary.reasoning_tokens) == (1024, 600)
    assert (summary.prompt_cache_hit_tokens, summary.prompt_cache_miss_tokens) == (1024, 176)
    assert summary.direct_cost is None
    assert (summary.direct_cost_observed, summary.direct_cost_complete) == (0, 0)


def test_an_unknown_model_keeps_its_tokens_and_makes_the_cost_unknown():
    summary = summarise(
        [priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA), priced(DASHSCOPE_USAGE, {}, None)]
    )
    assert summary.cost is None
    assert summary.unpriced_calls == 1
    assert summary.total_tokens == 4300
    assert summary.cost_source == CostSource.CATALOG_FALLBACK


def test_an_unknown_model_with_a_complete_provider_cost_is_still_priced():
    summary = summarise([priced({**DASHSCOPE_USAGE, "cost": "0.003"}, {}, None)])
    assert summary.cost_source == CostSource.PROVIDER
    assert summary.cost == Decimal("0.003")
    assert summary.unpriced_calls == 1


def test_costs_in_different_currencies_do_not_add_up():
    cny = Price("CNY", (PriceTier(None, Decimal("0.000002"), Decimal("0.000008")),))
    summary = summarise(
        [priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA), priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA, cny)]
    )
    assert summary.cost is None
    assert summary.currency == ""


def test_a_run_without_model_calls_costs_nothing():
    summary = summarise([])
    assert summary.cost == Decimal(0)
    assert summary.usage_complete
    assert summary.model_call_records == 0


# TEXT_MESSAGE_END digest ----------------------------------------------------------------------


def test_the_wire_digest_has_the_spec_fields_and_no_internal_ones():
    summary = summarise(
        [
            priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA),
            priced(DASHSCOPE_USAGE, DASHSCOPE_METADATA, QWEN_PLUS),
        ]
    )
    assert usage_digest(summary) == {
        "totalTokens": 4300,
        "cachedPromptTokens": 1024,
        "promptCacheHitTokens": 1024,
        "promptCacheMissTokens": 176,
        "reasoningTokens": 600,
        "costSource": "catalog_fallback",
        "usageComplete": True,
    }


def test_the_usage_summary_dumps_every_spec_field():
    dumped = summarise([priced(DEEPSEEK_USAGE, DEEPSEEK_METADATA)]).model_dump(mode="json")
    spec_fields = {
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "latency_ms",
        "cached_prompt_tokens",
        "prompt_cache_hit_tokens",
        "prompt_cache_miss_tokens",
        "reasoning_tokens",
        "direct_cost",
        "direct_cost_observed",
        "direct_cost_complete",
        "model_call_records",
        "usage_records",
        "direct_cost_records",
        "cost_source",
    }
    assert spec_fields <= dumped.keys()
    assert dumped["cost"] == "0.000203952"


def test_numbers_no_record_can_hold_are_not_usage():
    """A provider's count past 2**31 - 1 or a cost of 10**12 and more is an error of theirs:
    it is treated as unreported (the call is then not a complete usage record) instead of
    failing the write."""
    call = normalise_usage(
        {"input_tokens": 2**40, "output_tokens": 5, "cost": "1e15"},
        {"prompt_tokens": 2**33, "completion_tokens": 5},
    )
    assert call.input_tokens is None and call.output_tokens == 5
    assert call.direct_cost is None
    assert not call.usage_complete


CLAUDE_HAIKU = Price(
    "USD",
    (
        PriceTier(
            None,
            Decimal("0.000001"),
            Decimal("0.000005"),
            cache_hit_cost_per_token=Decimal("0.0000001"),
            cache_write_cost_per_token=Decimal("0.00000125"),
        ),
    ),
)


def test_cache_writes_cost_the_catalogs_cache_write_rate():
    # 25 * 0.000001 + 100 * 0.0000001 + 20 * 0.00000125 + 15 * 0.000005
    # = 0.000025 + 0.00001 + 0.000025 + 0.000075 = 0.000135
    usage = {"input_tokens": 145, "output_tokens": 15, "cache_input_tokens": 100}
    call = normalise_usage(usage, {"cache_creation_input_tokens": 20})
    assert catalog_cost(call, CLAUDE_HAIKU) == Decimal("0.000135")


def test_without_a_cache_write_rate_cache_writes_cost_the_input_rate():
    # 45 * 0.000001 + 100 * 0.0000001 + 15 * 0.000005 = 0.000045 + 0.00001 + 0.000075
    usage = {"input_tokens": 145, "output_tokens": 15, "cache_input_tokens": 100}
    call = normalise_usage(usage, {"cache_creation_input_tokens": 20})
    no_rate = Price(
        "USD",
        (PriceTier(None, Decimal("0.000001"), Decimal("0.000005"), Decimal("0.0000001")),),
    )
    assert catalog_cost(call, no_rate) == Decimal("0.000130")


def test_more_cache_writes_than_uncached_prompt_tokens_are_capped():
    # A glitch: 200 written of a 145-token prompt with 100 read: at most 45 were written.
    call = normalise_usage(
        {"input_tokens": 145, "output_tokens": 0, "cache_input_tokens": 100},
        {"cache_creation_input_tokens": 200},
    )
    assert call.cache_write_tokens == 45
