import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent_runs.models import Run, Thread
from billing.models import PriceCatalogEntry, PriceTier

DEEPSEEK_USAGE = {"input_tokens": 1200, "output_tokens": 300, "time": 2.5}
DEEPSEEK_METADATA = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "prompt_cache_hit_tokens": 1024,
    "prompt_cache_miss_tokens": 176,
}
# 176 * 0.00000028 + 1024 * 0.000000028 + 300 * 0.00000042 = 0.000203952
DEEPSEEK_COST = Decimal("0.000203952")


@pytest.fixture
def alice_user(db):
    return get_user_model().objects.create_user("alice", password="pw-12345!")


@pytest.fixture
def bob_user(db):
    return get_user_model().objects.create_user("bob", password="pw-12345!")


def run_for(user, status=Run.Status.RUNNING) -> Run:
    return Run.objects.create(
        thread=Thread.objects.create(owner=user),
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        runtime_mode=Run.RuntimeMode.CHAT,
        status=status,
        input={},
        input_sha256="",
    )


def price_entry(model_id, *tiers, currency="USD", days_ago=1) -> PriceCatalogEntry:
    """An entry in force since ``days_ago``; ``tiers`` as (max, input, output, cache)."""
    entry = PriceCatalogEntry.objects.create(
        model_id=model_id,
        currency=currency,
        source="test",
        effective_from=timezone.now() - timedelta(days=days_ago),
    )
    for bound, input_price, output_price, cache_price in tiers:
        PriceTier.objects.create(
            entry=entry,
            max_prompt_tokens=bound,
            input_cost_per_token=Decimal(input_price),
            output_cost_per_token=Decimal(output_price),
            cache_hit_cost_per_token=None if cache_price is None else Decimal(cache_price),
        )
    return entry


@pytest.fixture
def deepseek_price(db) -> PriceCatalogEntry:
    return price_entry("deepseek/deepseek-chat", (None, "0.00000028", "0.00000042", "0.000000028"))


@pytest.fixture
def qwen_price(db) -> PriceCatalogEntry:
    return price_entry(
        "dashscope/qwen3-max",
        (32_000, "0.0000012", "0.000006", None),
        (128_000, "0.0000024", "0.000012", None),
        (None, "0.000003", "0.000015", None),
    )
