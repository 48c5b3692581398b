"""Usage normalisation and cost maths (docs/spec/sse-events-and-usage.md, 5.2-5.6).

Pure: no ORM, no I/O, ``Decimal`` for every amount. The services and selectors load rows,
call these functions and store or return what they answer.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from billing.schemas import CostSource, UsageDigest, UsageSummary


@dataclass(frozen=True)
class PriceTier:
    """One tier of a catalog price (spec 5.5); ``max_prompt_tokens=None`` is unbounded.
    ``cache_write_cost_per_token``: a prompt token written to the provider's cache
    (Anthropic's cache creation), priced apart where the catalog says."""

    max_prompt_tokens: int | None
    input_cost_per_token: Decimal
    output_cost_per_token: Decimal
    cache_hit_cost_per_token: Decimal | None = None
    cache_write_cost_per_token: Decimal | None = None


@dataclass(frozen=True)
class Price:
    """A catalog entry's prices."""

    currency: str
    tiers: tuple[PriceTier, ...]


@dataclass(frozen=True)
class CallUsage:
    """One model call's usage, normalised (spec 5.2). Token counts the provider did not report
    are ``None`` for prompt/completion/total and ``0`` for the detail counts."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: int | None = None
    cached_prompt_tokens: int = 0
    prompt_cache_hit_tokens: int = 0
    prompt_cache_miss_tokens: int = 0
    reasoning_tokens: int = 0
    direct_cost: Decimal | None = None
    # Prompt tokens written to the provider's cache (part of input_tokens, not cached ones).
    cache_write_tokens: int = 0

    @property
    def usage_complete(self) -> bool:
        """Whether this call counts as a usage record: both token counts are known."""
        return self.input_tokens is not None and self.output_tokens is not None


@dataclass(frozen=True)
class PricedCall:
    """A call with its catalog cost (``None``: no catalog price) and the currency of its
    costs."""

    usage: CallUsage
    catalog_cost: Decimal | None
    currency: str


# What a usage record's columns hold: a larger number from a provider is treated as unreported.
MAX_TOKEN_COUNT = 2**31 - 1
MAX_AMOUNT = Decimal(10) ** 12


def normalise_usage(usage: Mapping[str, Any], metadata: Mapping[str, Any]) -> CallUsage:
    """Read one call's usage in the spec's order (5.2): the direct fields first, then the
    provider's raw usage (``metadata``) to fill what is missing. The direct fields of an
    Anthropic, Gemini or Ollama call are already in the spec's sense (the runtime adds
    Anthropic's cached prompt tokens to its ``input_tokens``); their raw usage adds Gemini's
    ``thoughtsTokenCount`` as reasoning tokens."""
    input_tokens = _first_int(usage.get("input_tokens"), metadata.get("prompt_tokens"))
    output_tokens = _first_int(usage.get("output_tokens"), metadata.get("completion_tokens"))
    total_tokens = _first_int(usage.get("total_tokens"), metadata.get("total_tokens"))
    if total_tokens is None and input_tokens is not None and output_tokens is not None:
        total_tokens = input_tokens + output_tokens
    hit_tokens = _first_int(metadata.get("prompt_cache_hit_tokens"))
    cached = _cached_tokens(usage, metadata, hit_tokens, input_tokens)
    return CallUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total_tokens,
        latency_ms=_latency_ms(usage.get("time")),
        cached_prompt_tokens=cached,
        prompt_cache_hit_tokens=hit_tokens or 0,
        prompt_cache_miss_tokens=_first_int(metadata.get("prompt_cache_miss_tokens")) or 0,
        reasoning_tokens=_reasoning_tokens(metadata),
        direct_cost=_first_cost(
            usage.get("cost"), metadata.get("cost"), metadata.get("total_cost")
        ),
        cache_write_tokens=_cache_write_tokens(usage, metadata, input_tokens, cached),
    )


def _cached_tokens(
    usage: Mapping[str, Any],
    metadata: Mapping[str, Any],
    hit_tokens: int | None,
    input_tokens: int | None,
) -> int:
    cached = (
        _first_int(
            _path(metadata, "prompt_tokens_details", "cached_tokens"),
            hit_tokens,
            # AgentScope's ChatUsage field; it defaults to 0, so it comes last.
            usage.get("cache_input_tokens"),
        )
        or 0
    )
    if input_tokens is not None:
        cached = min(cached, input_tokens)  # more cached than sent is a provider glitch
    return cached


def _reasoning_tokens(metadata: Mapping[str, Any]) -> int:
    return (
        _first_int(
            _path(metadata, "completion_tokens_details", "reasoning_tokens"),
            metadata.get("thoughtsTokenCount"),  # Gemini's usageMetadata
        )
        or 0
    )


def _cache_write_tokens(
    usage: Mapping[str, Any], metadata: Mapping[str, Any], input_tokens: int | None, cached: int
) -> int:
    """Anthropic's ``cache_creation_input_tokens`` (AgentScope's field of the same name), at
    most the prompt's tokens not read from the cache."""
    written = (
        _first_int(
            metadata.get("cache_creation_input_tokens"),
            usage.get("cache_creation_input_tokens"),
        )
        or 0
    )
    return written if input_tokens is None else min(written, max(input_tokens - cached, 0))


def tier_for(tiers: Iterable[PriceTier], prompt_tokens: int) -> PriceTier | None:
    """The tier whose ``max_prompt_tokens`` the prompt fits under (inclusive), the smallest
    such; ``None`` if every tier is bounded below the prompt (spec 5.5, tier selection)."""
    fitting = [
        tier
        for tier in tiers
        if tier.max_prompt_tokens is None or prompt_tokens <= tier.max_prompt_tokens
    ]
    if not fitting:
        return None
    return min(fitting, key=lambda tier: (tier.max_prompt_tokens is None, tier.max_prompt_tokens))


def catalog_cost(call: CallUsage, price: Price | None) -> Decimal | None:
    """The catalog cost of one call (spec 5.5), or ``None`` when there is no price for it.

    ``uncached * input + cached * cached_rate + completion * output``, where the cached rate
    is the tier's ``cache_hit_cost_per_token`` when set and above zero, else the input rate.
    Of the uncached tokens, those written to the provider's cache are priced at the tier's
    ``cache_write_cost_per_token`` when set and above zero (else the input rate, as the
    spec's formula has it).
    Tokens the provider did not report count as zero; the call is then flagged incomplete.
    """
    if price is None:
        return None
    prompt_tokens = call.input_tokens or 0
    tier = tier_for(price.tiers, prompt_tokens)
    if tier is None:
        return None
    cached = min(call.cached_prompt_tokens, prompt_tokens)
    written = min(call.cache_write_tokens, prompt_tokens - cached)
    return (
        (prompt_tokens - cached - written) * tier.input_cost_per_token
        + cached * _rate_or_input(tier.cache_hit_cost_per_token, tier)
        + written * _rate_or_input(tier.cache_write_cost_per_token, tier)
        + (call.output_tokens or 0) * tier.output_cost_per_token
    )


def _rate_or_input(rate: Decimal | None, tier: PriceTier) -> Decimal:
    return rate if rate is not None and rate > 0 else tier.input_cost_per_token


def cost_source_for(
    *,
    usage_complete: bool,
    direct_cost_observed: bool,
    direct_cost_complete: bool,
    direct_cost: Decimal | None,
) -> CostSource:
    """Spec 5.4 and 5.6: the provider's cost only when all four conditions hold; otherwise
    the catalog, labelled by why."""
    valid_direct = direct_cost is not None and direct_cost.is_finite() and direct_cost >= 0
    if usage_complete and direct_cost_observed and direct_cost_complete and valid_direct:
        return CostSource.PROVIDER
    if not usage_complete:
        return CostSource.INCOMPLETE_USAGE_FALLBACK
    if direct_cost_observed:
        return CostSource.CATALOG_FALLBACK_INCOMPLETE_PROVIDER_COST
    return CostSource.CATALOG_FALLBACK


def price_call(call: CallUsage, price: Price | None, *, default_currency: str) -> PricedCall:
    """One call priced by the catalog entry in force for it (``None``: the model has none)."""
    return PricedCall(
        usage=call,
        catalog_cost=catalog_cost(call, price),
        currency=price.currency if price is not None else default_currency,
    )


def call_cost(call: PricedCall) -> tuple[Decimal | None, CostSource]:
    """The cost of a single call and its source, by the same rules as a run's."""
    summary = summarise([call])
    return summary.cost, summary.cost_source


def summarise(calls: Sequence[PricedCall]) -> UsageSummary:
    """A run's ``usage_summary`` (spec 5.3) and its cost (5.4-5.6) from its calls.

    The decision is made once for the run: the provider's total when every call reported
    usage and a valid direct cost, otherwise the sum of every call's catalog cost. That sum
    is ``None`` (unknown) when a call has no catalog price or the calls' currencies differ.
    """
    usages = [call.usage for call in calls]
    direct = [usage.direct_cost for usage in usages if usage.direct_cost is not None]
    usage_records = sum(1 for usage in usages if usage.usage_complete)
    direct_cost = sum(direct, Decimal(0)) if direct else None
    usage_complete = usage_records == len(calls)
    source = _calls_cost_source(usage_complete, direct, direct_cost, calls=len(calls))
    currencies = {call.currency for call in calls}
    unpriced = sum(1 for call in calls if call.catalog_cost is None)
    return UsageSummary(
        **_summed(usages),
        direct_cost=direct_cost,
        direct_cost_observed=int(bool(direct)),
        direct_cost_complete=int(bool(direct) and len(direct) == len(calls)),
        model_call_records=len(calls),
        usage_records=usage_records,
        direct_cost_records=len(direct),
        cost_source=source,
        usage_complete=usage_complete,
        cost=_run_cost(calls, source, direct_cost, priced=not unpriced and len(currencies) < 2),
        currency=currencies.pop() if len(currencies) == 1 else "",
        unpriced_calls=unpriced,
    )


def _calls_cost_source(
    usage_complete: bool, direct: list[Decimal], direct_cost: Decimal | None, *, calls: int
) -> CostSource:
    """The cost source of ``calls`` calls, ``direct`` the direct costs some reported."""
    return cost_source_for(
        usage_complete=usage_complete,
        direct_cost_observed=bool(direct),
        direct_cost_complete=len(direct) == calls,
        direct_cost=direct_cost,
    )


def _run_cost(
    calls: Sequence[PricedCall], source: CostSource, direct_cost: Decimal | None, *, priced: bool
) -> Decimal | None:
    """The provider's total, or the sum of the catalog costs when every call has one in a
    single currency (``priced``); else unknown."""
    if source == CostSource.PROVIDER:
        return direct_cost
    if not priced:
        return None
    return sum((call.catalog_cost or Decimal(0) for call in calls), Decimal(0))


# A summary's sums of its calls' counts (an unknown count adds nothing).
_SUMMED = (
    *("input_tokens", "output_tokens", "total_tokens", "latency_ms", "cached_prompt_tokens"),
    *("prompt_cache_hit_tokens", "prompt_cache_miss_tokens", "reasoning_tokens"),
)


def _summed(usages: Sequence[CallUsage]) -> dict[str, Any]:
    return {name: sum(getattr(usage, name) or 0 for usage in usages) for name in _SUMMED}


def usage_digest(summary: UsageSummary) -> dict[str, Any]:
    """The usage digest ``TEXT_MESSAGE_END`` carries on the wire (spec 3.4), camelCase."""
    digest = UsageDigest(
        total_tokens=summary.total_tokens,
        cached_prompt_tokens=summary.cached_prompt_tokens,
        prompt_cache_hit_tokens=summary.prompt_cache_hit_tokens,
        prompt_cache_miss_tokens=summary.prompt_cache_miss_tokens,
        reasoning_tokens=summary.reasoning_tokens,
        cost_source=summary.cost_source,
        usage_complete=summary.usage_complete,
    )
    return digest.model_dump(by_alias=True, mode="json")


def _path(mapping: Mapping[str, Any], *keys: str) -> Any:
    value: Any = mapping
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _as_int(value: Any) -> int | None:
    """A non-negative token count a record can hold, or ``None`` for anything that is not
    one (a count past what a call can have is a provider's error, not usage)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        count = int(value.strip())
    else:
        return None
    return count if 0 <= count <= MAX_TOKEN_COUNT else None


def _first_int(*values: Any) -> int | None:
    for value in values:
        parsed = _as_int(value)
        if parsed is not None:
            return parsed
    return None


def _as_decimal(value: Any) -> Decimal | None:
    """A finite, non-negative amount, or ``None``: an invalid direct cost is not a cost."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not isinstance(value, int | float | str | Decimal):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and 0 <= amount < MAX_AMOUNT else None


def _first_cost(*values: Any) -> Decimal | None:
    for value in values:
        amount = _as_decimal(value)
        if amount is not None:
            return amount
    return None


def _latency_ms(seconds: Any) -> int | None:
    amount = _as_decimal(seconds)
    if amount is None:
        return None
    return int((amount * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))
