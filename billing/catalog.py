"""Pricing catalog sources: LiteLLM's bundled catalog and our own JSON/YAML file, mapped onto
catalog prices with tiers (docs/spec/sse-events-and-usage.md 5.5).

The mapping functions are pure; only ``load_litellm_model_cost`` and ``load_catalog_file`` do
I/O, and only the management command calls them.

The file format (docs/billing.md, "Pricing catalog file")::

    currency: USD                       # default for every model (default USD)
    source: "vendor price list 2026-03" # stored on each entry (default: the file's name)
    effective_from: 2026-03-01T00:00:00Z  # default: the time of the update
    models:
      deepseek/deepseek-chat:           # provider/model, as the worker names it
        input_cost_per_token: "0.00000028"   # one unbounded tier, or:
        output_cost_per_token: "0.00000042"
        cache_hit_cost_per_token: "0.000000028"
        # cache_write_cost_per_token: a prompt token written to the cache (optional)
      dashscope/qwen3-max:
        currency: USD                   # optional per model, as are source_url, effective_from
        tiers:
          - {max_prompt_tokens: 32000, input_cost_per_token: "0.0000012",
             output_cost_per_token: "0.000006"}
          - {max_prompt_tokens: null, input_cost_per_token: "0.0000024",
             output_cost_per_token: "0.000012"}
"""

import importlib
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from billing.pricing import PriceTier

# Per-token prices are stored with this many decimal places (0.000000000000001).
PRICE_DECIMAL_PLACES = 15
_QUANTUM = Decimal(1).scaleb(-PRICE_DECIMAL_PLACES)
_MODEL_ID = re.compile(r"^[A-Za-z0-9_.-]+/\S+$")
_ABOVE = re.compile(r"^input_cost_per_token_above_(\d+)k_tokens$")
# LiteLLM modes billed per prompt and completion token.
_TOKEN_MODES = {"chat", "completion", "responses"}
LITELLM_CURRENCY = "USD"
LITELLM_PROVIDER = "litellm"  # every model LiteLLM prices, as litellm/ model ids
_LITELLM_BUNDLED = "model_prices_and_context_window_backup.json"


class CatalogError(ValueError):
    """A catalog source that cannot be read; nothing is changed."""


@dataclass(frozen=True)
class CatalogPrice:
    """One model's price as a source states it."""

    model_id: str
    currency: str
    tiers: tuple[PriceTier, ...]
    source: str
    source_url: str = ""
    effective_from: datetime | None = None


def tiers_key(tiers: Iterable[PriceTier]) -> tuple[tuple[Any, ...], ...]:
    """Tiers in a comparable form: same prices, same key, whatever their order."""
    return tuple(
        sorted(
            (
                (
                    tier.max_prompt_tokens is None,
                    tier.max_prompt_tokens or 0,
                    tier.input_cost_per_token.normalize(),
                    tier.output_cost_per_token.normalize(),
                    None
                    if tier.cache_hit_cost_per_token is None
                    else tier.cache_hit_cost_per_token.normalize(),
                    None
                    if tier.cache_write_cost_per_token is None
                    else tier.cache_write_cost_per_token.normalize(),
                )
                for tier in tiers
            ),
        )
    )


# LiteLLM -----------------------------------------------------------------------------------


def litellm_catalog_prices(
    model_cost: Mapping[str, Any], *, providers: Iterable[str]
) -> list[CatalogPrice]:
    """The chat models of ``providers`` in LiteLLM's ``model_cost``, ids in ``provider/model``
    form. ``tiered_pricing`` and ``*_above_Nk_tokens`` prices become tiers; an entry keyed
    both ways (``deepseek-chat`` and ``deepseek/deepseek-chat``) is taken once, prefixed.

    The provider ``litellm`` stands for every chat model LiteLLM prices, as the ``litellm/``
    model ids name them: ``litellm/<LiteLLM's key>`` (``litellm/openrouter/openai/gpt-4o``)
    and, for a key without its provider, ``litellm/<provider>/<key>`` too."""
    wanted = set(providers)
    prices: dict[str, CatalogPrice] = {}
    for key, info in model_cost.items():
        provider = _litellm_chat_provider(info, wanted)
        tiers = litellm_tiers(info) if provider else ()
        if not tiers:
            continue
        for model_id in _litellm_ids(key, provider, wanted, taken=prices):
            prices[model_id] = CatalogPrice(
                model_id=model_id,
                currency=LITELLM_CURRENCY,
                tiers=tiers,
                source="litellm",
                source_url=str(info.get("source") or "")[:500],
            )
    return sorted(prices.values(), key=lambda price: price.model_id)


def _litellm_chat_provider(info: Any, wanted: set[str]) -> str:
    """The provider of a LiteLLM entry priced by the token, of a wanted provider; "" for
    any other entry."""
    if not isinstance(info, Mapping) or not info.get("litellm_provider"):
        return ""
    provider = str(info["litellm_provider"])
    if provider not in wanted and LITELLM_PROVIDER not in wanted:
        return ""
    return provider if info.get("mode", "chat") in _TOKEN_MODES else ""


def _litellm_ids(
    key: str, provider: str, wanted: set[str], *, taken: Mapping[str, Any]
) -> list[str]:
    """The model ids of LiteLLM's entry ``key``: ``provider/model`` if its provider is wanted
    (an unprefixed key yields to its prefixed twin already ``taken``), and the ``litellm/``
    ones if every model is."""
    prefixed = key.startswith(f"{provider}/")
    ids = []
    if provider in wanted and not (f"{provider}/{key}" in taken and not prefixed):
        ids.append(key if prefixed else f"{provider}/{key}")
    if LITELLM_PROVIDER in wanted:
        ids += [f"{LITELLM_PROVIDER}/{key}"]
        ids += [] if prefixed else [f"{LITELLM_PROVIDER}/{provider}/{key}"]
    return ids


def litellm_tiers(info: Mapping[str, Any]) -> tuple[PriceTier, ...]:
    """One LiteLLM entry's token prices as tiers; empty when it has none."""
    tiered = info.get("tiered_pricing")
    if isinstance(tiered, list) and tiered:
        return _litellm_tiered(tiered)
    base_input = _price(info.get("input_cost_per_token"))
    base_output = _price(info.get("output_cost_per_token"))
    if base_input is None or base_output is None:
        return ()
    thresholds = sorted(
        int(match.group(1)) * 1000 for match in map(_ABOVE.match, info) if match is not None
    )
    base_cache = _price(info.get("cache_read_input_token_cost"))
    if base_cache is None:
        base_cache = _price(info.get("input_cost_per_token_cache_hit"))
    base_write = _price(info.get("cache_creation_input_token_cost"))
    bounds: list[int | None] = [*thresholds, None]
    tiers = [PriceTier(bounds[0], base_input, base_output, base_cache, base_write)]
    for above, bound in zip(thresholds, bounds[1:], strict=True):
        tiers.append(_litellm_tier_above(info, above, bound, previous=tiers[-1]))
    return tuple(tiers)


def _litellm_tier_above(
    info: Mapping[str, Any], above: int, bound: int | None, *, previous: PriceTier
) -> PriceTier:
    """The tier of prompts over ``above`` tokens (``*_above_Nk_tokens``), up to ``bound``; a
    price it does not name is the tier below's."""
    suffix = f"_above_{above // 1000}k_tokens"
    return PriceTier(
        bound,
        _price(info.get(f"input_cost_per_token{suffix}")) or previous.input_cost_per_token,
        _price(info.get(f"output_cost_per_token{suffix}")) or previous.output_cost_per_token,
        _price(info.get(f"cache_read_input_token_cost{suffix}")),
        _price(info.get(f"cache_creation_input_token_cost{suffix}")),
    )


def _litellm_tiered(tiered: list[Any]) -> tuple[PriceTier, ...]:
    """``tiered_pricing: [{range: [lo, hi], input_cost_per_token, ...}]``: ``hi`` is the tier's
    ``max_prompt_tokens``; the last tier is unbounded so a longer prompt is still priced."""
    rows = [row for row in tiered if isinstance(row, Mapping) and "range" in row]
    rows.sort(key=lambda row: float(row["range"][0]))
    tiers = []
    for index, row in enumerate(rows):
        input_price = _price(row.get("input_cost_per_token"))
        output_price = _price(row.get("output_cost_per_token"))
        if input_price is None or output_price is None:
            return ()
        last = index == len(rows) - 1
        tiers.append(
            PriceTier(
                None if last else int(float(row["range"][1])),
                input_price,
                output_price,
                _price(row.get("cache_read_input_token_cost")),
                _price(row.get("cache_creation_input_token_cost")),
            )
        )
    return tuple(tiers)


def _price(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    amount = Decimal(repr(value) if isinstance(value, float) else str(value))
    if not amount.is_finite() or amount < 0:
        return None
    return amount.quantize(_QUANTUM)


# Our file ----------------------------------------------------------------------------------


class _TierSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_prompt_tokens: int | None = Field(default=None, ge=1)
    input_cost_per_token: Decimal = Field(ge=0, decimal_places=PRICE_DECIMAL_PLACES)
    output_cost_per_token: Decimal = Field(ge=0, decimal_places=PRICE_DECIMAL_PLACES)
    cache_hit_cost_per_token: Decimal | None = Field(
        default=None, ge=0, decimal_places=PRICE_DECIMAL_PLACES
    )
    cache_write_cost_per_token: Decimal | None = Field(
        default=None, ge=0, decimal_places=PRICE_DECIMAL_PLACES
    )


class _ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    source_url: str = Field(default="", max_length=500)
    effective_from: datetime | None = None
    tiers: list[_TierSpec] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _one_tier_shorthand(cls, data: Any) -> Any:
        prices = (
            "input_cost_per_token",
            "output_cost_per_token",
            "cache_hit_cost_per_token",
            "cache_write_cost_per_token",
        )
        if isinstance(data, dict) and "tiers" not in data and "input_cost_per_token" in data:
            rest = {key: value for key, value in data.items() if key not in prices}
            return {**rest, "tiers": [{key: data[key] for key in prices if key in data}]}
        return data

    @field_validator("tiers")
    @classmethod
    def _distinct_bounds(cls, tiers: list[_TierSpec]) -> list[_TierSpec]:
        bounds = [tier.max_prompt_tokens for tier in tiers]
        if len(set(bounds)) != len(bounds):
            raise ValueError("two tiers have the same max_prompt_tokens")
        return tiers


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    source: str | None = Field(default=None, max_length=200)
    effective_from: datetime | None = None
    models: dict[str, _ModelSpec] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _model_ids(cls, models: dict[str, _ModelSpec]) -> dict[str, _ModelSpec]:
        for model_id in models:
            if not _MODEL_ID.match(model_id) or len(model_id) > 200:
                raise ValueError(f"{model_id!r} is not a model id of the form provider/model")
        return models


def file_catalog_prices(data: Any, *, default_source: str) -> list[CatalogPrice]:
    """The prices of a catalog file's parsed content; ``CatalogError`` says what is wrong."""
    try:
        parsed = _CatalogFile.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(_describe(exc)) from exc
    return [
        CatalogPrice(
            model_id=model_id,
            currency=spec.currency or parsed.currency,
            tiers=tuple(
                PriceTier(
                    tier.max_prompt_tokens,
                    tier.input_cost_per_token,
                    tier.output_cost_per_token,
                    tier.cache_hit_cost_per_token,
                    tier.cache_write_cost_per_token,
                )
                for tier in spec.tiers
            ),
            source=parsed.source or default_source,
            source_url=spec.source_url,
            effective_from=_aware(spec.effective_from or parsed.effective_from),
        )
        for model_id, spec in sorted(parsed.models.items())
    ]


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)  # a file's naive time is UTC, as the server's


def _describe(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or '(top level)'}: {error['msg']}"
        for error in exc.errors()
    ]
    return "; ".join(problems)


# I/O ---------------------------------------------------------------------------------------


def load_catalog_file(path: Path) -> Any:
    """A JSON (``.json``) or YAML (anything else) file's content."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path} is not valid {_format_name(path)}: {exc}") from exc


def _format_name(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"


def load_litellm_model_cost() -> Mapping[str, Any]:
    """LiteLLM's bundled catalog (``litellm.model_cost``), offline.

    Importing LiteLLM takes seconds, so only the management command does it, never a web
    request. Where LiteLLM is installed but cannot be imported (its own dependencies are
    missing), its bundled catalog file, the one ``model_cost`` is loaded from, is read directly.
    """
    # Without this LiteLLM fetches the catalog from the network at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        litellm = importlib.import_module("litellm")  # not a dependency of the web process
    except ImportError as exc:
        return _bundled_litellm_catalog(exc)
    model_cost: Mapping[str, Any] = litellm.model_cost
    return model_cost


def _bundled_litellm_catalog(import_error: ImportError) -> Mapping[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError(
            f"LiteLLM is not installed ({import_error}); install it or give a catalog FILE"
        )
    bundled = Path(next(iter(spec.submodule_search_locations))) / _LITELLM_BUNDLED
    try:
        data = json.loads(bundled.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read LiteLLM's bundled catalog {bundled}: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"LiteLLM's bundled catalog {bundled} is not a JSON object")
    return data
