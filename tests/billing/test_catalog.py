"""Catalog sources mapped onto tiers (billing/catalog.py), without a database."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.catalog import CatalogError, file_catalog_prices, litellm_catalog_prices
from billing.pricing import PriceTier

MODEL_COST = {
    "sample_spec": {"input_cost_per_token": 0.0, "litellm_provider": "one of ..."},
    "deepseek-chat": {
        "litellm_provider": "deepseek",
        "input_cost_per_token": 9e-07,
        "output_cost_per_token": 9e-07,
        "mode": "chat",
    },
    "deepseek/deepseek-chat": {
        "litellm_provider": "deepseek",
        "input_cost_per_token": 2.8e-07,
        "output_cost_per_token": 4.2e-07,
        "cache_read_input_token_cost": 2.8e-08,
        "mode": "chat",
        "source": "https://api-docs.deepseek.com/quick_start/pricing",
    },
    "deepseek/deepseek-v4-pro": {
        "litellm_provider": "deepseek",
        "input_cost_per_token": 1.32e-06,
        "output_cost_per_token": 3.96e-06,
        "input_cost_per_token_cache_hit": 4.4e-08,
        "mode": "chat",
    },
    "dashscope/qwen3-max": {
        "litellm_provider": "dashscope",
        "mode": "chat",
        "tiered_pricing": [
            {
                "input_cost_per_token": 2.4e-06,
                "output_cost_per_token": 1.2e-05,
                "range": [32000.0, 128000.0],
            },
            {
                "input_cost_per_token": 1.2e-06,
                "output_cost_per_token": 6e-06,
                "range": [0, 32000.0],
            },
            {
                "input_cost_per_token": 3e-06,
                "output_cost_per_token": 1.5e-05,
                "range": [128000.0, 252000.0],
            },
        ],
    },
    "gpt-5.4": {
        "litellm_provider": "openai",
        "mode": "chat",
        "input_cost_per_token": 2.5e-06,
        "output_cost_per_token": 1.5e-05,
        "cache_read_input_token_cost": 2.5e-07,
        "input_cost_per_token_above_272k_tokens": 5e-06,
        "output_cost_per_token_above_272k_tokens": 2.25e-05,
        "cache_read_input_token_cost_above_272k_tokens": 5e-07,
        "input_cost_per_token_above_272k_tokens_priority": 1e-05,
    },
    "dall-e-3": {
        "litellm_provider": "openai",
        "mode": "image_generation",
        "input_cost_per_token": 1e-06,
        "output_cost_per_token": 1e-06,
    },
    "openai/sora-2": {"litellm_provider": "openai", "mode": "video_generation"},
    "claude-sonnet-9": {
        "litellm_provider": "anthropic",
        "mode": "chat",
        "input_cost_per_token": 3e-06,
        "output_cost_per_token": 1.5e-05,
        "cache_read_input_token_cost": 3e-07,
        "cache_creation_input_token_cost": 3.75e-06,
    },
    "openrouter/openai/gpt-9": {
        "litellm_provider": "openrouter",
        "mode": "chat",
        "input_cost_per_token": 1.5e-07,
        "output_cost_per_token": 6e-07,
    },
    "dashscope/qwen-no-price": {"litellm_provider": "dashscope", "mode": "chat"},
}


def by_id(prices):
    return {price.model_id: price for price in prices}


def test_litellm_prices_keep_only_our_providers_chat_models_in_provider_model_form():
    prices = by_id(
        litellm_catalog_prices(MODEL_COST, providers=["deepseek", "dashscope", "openai"])
    )
    assert sorted(prices) == [
        "dashscope/qwen3-max",
        "deepseek/deepseek-chat",
        "deepseek/deepseek-v4-pro",
        "openai/gpt-5.4",
    ]
    assert {price.currency for price in prices.values()} == {"USD"}
    assert prices["deepseek/deepseek-chat"].source == "litellm"
    assert prices["deepseek/deepseek-chat"].source_url.startswith("https://api-docs.deepseek.com")


def test_litellm_prices_take_the_prefixed_entry_and_its_cache_read_price():
    prices = by_id(litellm_catalog_prices(MODEL_COST, providers=["deepseek"]))
    assert prices["deepseek/deepseek-chat"].tiers == (
        PriceTier(None, Decimal("0.00000028"), Decimal("0.00000042"), Decimal("0.000000028")),
    )
    # DeepSeek's other spelling of the cache price.
    assert prices["deepseek/deepseek-v4-pro"].tiers[0].cache_hit_cost_per_token == Decimal("4.4E-8")


def test_litellm_tiered_pricing_becomes_tiers_bounded_by_their_ranges_end():
    prices = by_id(litellm_catalog_prices(MODEL_COST, providers=["dashscope"]))
    assert prices["dashscope/qwen3-max"].tiers == (
        PriceTier(32_000, Decimal("0.0000012"), Decimal("0.000006")),
        PriceTier(128_000, Decimal("0.0000024"), Decimal("0.000012")),
        # The last range's end is the context size: unbounded, so a longer prompt is priced.
        PriceTier(None, Decimal("0.000003"), Decimal("0.000015")),
    )


def test_litellm_above_nk_prices_become_a_tier_above_n_thousand_prompt_tokens():
    prices = by_id(litellm_catalog_prices(MODEL_COST, providers=["openai"]))
    assert prices["openai/gpt-5.4"].tiers == (
        PriceTier(272_000, Decimal("0.0000025"), Decimal("0.000015"), Decimal("0.00000025")),
        PriceTier(None, Decimal("0.000005"), Decimal("0.0000225"), Decimal("0.0000005")),
    )


def test_litellm_prices_keep_the_cache_write_price():
    prices = by_id(litellm_catalog_prices(MODEL_COST, providers=["anthropic"]))
    assert prices["anthropic/claude-sonnet-9"].tiers == (
        PriceTier(
            None,
            Decimal("0.000003"),
            Decimal("0.000015"),
            cache_hit_cost_per_token=Decimal("0.0000003"),
            cache_write_cost_per_token=Decimal("0.00000375"),
        ),
    )


def test_the_litellm_provider_prices_every_model_as_its_litellm_model_id():
    prices = by_id(litellm_catalog_prices(MODEL_COST, providers=["litellm"]))
    # LiteLLM's key after litellm/, and the provider's prefix for a key without one.
    assert {
        "litellm/openrouter/openai/gpt-9",
        "litellm/claude-sonnet-9",
        "litellm/anthropic/claude-sonnet-9",
        "litellm/deepseek/deepseek-chat",
        "litellm/gpt-5.4",
        "litellm/openai/gpt-5.4",
    } <= set(prices)
    assert not any(model_id.startswith(("openrouter/", "anthropic/")) for model_id in prices)
    assert "litellm/dall-e-3" not in prices  # not billed per token
    assert prices["litellm/openrouter/openai/gpt-9"].tiers == (
        PriceTier(None, Decimal("0.00000015"), Decimal("0.0000006")),
    )


def test_a_catalog_file_takes_one_tier_shorthand_and_tiers():
    prices = file_catalog_prices(
        {
            "currency": "CNY",
            "effective_from": "2026-03-01T08:00:00",
            "models": {
                "deepseek/deepseek-chat": {
                    "input_cost_per_token": "0.000002",
                    "output_cost_per_token": "0.000003",
                    "cache_hit_cost_per_token": "0.0000002",
                },
                "dashscope/qwen3-max": {
                    "currency": "USD",
                    "source_url": "https://example.com/prices",
                    "tiers": [
                        {
                            "max_prompt_tokens": 32000,
                            "input_cost_per_token": 1.2e-06,
                            "output_cost_per_token": "0.000006",
                        },
                        {
                            "max_prompt_tokens": None,
                            "input_cost_per_token": "0.0000024",
                            "output_cost_per_token": "0.000012",
                        },
                    ],
                },
            },
        },
        default_source="prices.yaml",
    )
    qwen, deepseek = prices
    assert deepseek.currency == "CNY"
    assert deepseek.tiers == (
        PriceTier(None, Decimal("0.000002"), Decimal("0.000003"), Decimal("0.0000002")),
    )
    assert qwen.currency == "USD"
    assert qwen.tiers[0] == PriceTier(32_000, Decimal("0.0000012"), Decimal("0.000006"))
    # A naive time in the file is UTC.
    assert deepseek.effective_from == datetime(2026, 3, 1, 8, tzinfo=UTC)
    assert deepseek.source == "prices.yaml"


def test_a_catalog_file_takes_a_cache_write_price():
    (price,) = file_catalog_prices(
        {
            "models": {
                "anthropic/claude-haiku-4-5": {
                    "input_cost_per_token": "0.000001",
                    "output_cost_per_token": "0.000005",
                    "cache_hit_cost_per_token": "0.0000001",
                    "cache_write_cost_per_token": "0.00000125",
                }
            }
        },
        default_source="prices.yaml",
    )
    assert price.tiers[0].cache_write_cost_per_token == Decimal("0.00000125")
    assert price.tiers[0].cache_hit_cost_per_token == Decimal("0.0000001")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"models": {}}, "models"),
        (
            {"models": {"no-provider": {"input_cost_per_token": 1, "output_cost_per_token": 1}}},
            "provider/model",
        ),
        (
            {"models": {"a/b": {"input_cost_per_token": -1, "output_cost_per_token": 1}}},
            "greater than or equal to 0",
        ),
        (
            {
                "models": {
                    "a/b": {
                        "input_cost_per_token": "0.0000000000000001",
                        "output_cost_per_token": 1,
                    }
                }
            },
            "decimal places",
        ),
        (
            {
                "models": {
                    "a/b": {"input_cost_per_token": 1, "output_cost_per_token": 1, "colour": "red"}
                }
            },
            "colour",
        ),
        (
            {
                "models": {
                    "a/b": {"tiers": [{"input_cost_per_token": 1, "output_cost_per_token": 1}] * 2}
                }
            },
            "same max_prompt_tokens",
        ),
        ({"models": {"a/b": {"tiers": []}}}, "tiers"),
        (
            {
                "currency": "dollars",
                "models": {"a/b": {"input_cost_per_token": 1, "output_cost_per_token": 1}},
            },
            "currency",
        ),
        (["not", "a", "mapping"], "(top level)"),
    ],
)
def test_a_bad_catalog_file_is_an_error_that_says_what_is_wrong(data, message):
    with pytest.raises(CatalogError, match=message.replace("(", r"\(").replace(")", r"\)")):
        file_catalog_prices(data, default_source="bad.yaml")
