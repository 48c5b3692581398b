"""`manage.py update_pricing_catalog`, from LiteLLM's catalog and from a file."""

import importlib.util
import io
import json
import os
import sys
import types
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from billing.models import PriceCatalogEntry, UsageRecord
from billing.services import usage_record
from tests.billing.conftest import DEEPSEEK_COST, DEEPSEEK_METADATA, DEEPSEEK_USAGE, run_for

pytestmark = pytest.mark.django_db

MODEL_COST: dict[str, Any] = {
    "deepseek/deepseek-chat": {
        "litellm_provider": "deepseek",
        "mode": "chat",
        "input_cost_per_token": 2.8e-07,
        "output_cost_per_token": 4.2e-07,
        "cache_read_input_token_cost": 2.8e-08,
    },
    "dashscope/qwen3-max": {
        "litellm_provider": "dashscope",
        "mode": "chat",
        "tiered_pricing": [
            {
                "input_cost_per_token": 1.2e-06,
                "output_cost_per_token": 6e-06,
                "range": [0, 32000.0],
            },
            {
                "input_cost_per_token": 2.4e-06,
                "output_cost_per_token": 1.2e-05,
                "range": [32000.0, 252000.0],
            },
        ],
    },
    "gpt-4o-mini": {
        "litellm_provider": "openai",
        "mode": "chat",
        "input_cost_per_token": 1.5e-07,
        "output_cost_per_token": 6e-07,
    },
    "mistral-x": {
        "litellm_provider": "mistral",
        "mode": "chat",
        "input_cost_per_token": 1e-06,
        "output_cost_per_token": 1e-06,
    },
}

CATALOG_YAML = """
currency: USD
source: vendor list 2026-03
models:
  deepseek/deepseek-chat:
    input_cost_per_token: "0.00000028"
    output_cost_per_token: "0.00000042"
    cache_hit_cost_per_token: "0.000000028"
  dashscope/qwen-plus:
    tiers:
      - max_prompt_tokens: 128000
        input_cost_per_token: "0.0000004"
        output_cost_per_token: "0.0000012"
      - max_prompt_tokens: null
        input_cost_per_token: "0.0000012"
        output_cost_per_token: "0.0000036"
"""


def run(*args) -> str:
    out = io.StringIO()
    call_command("update_pricing_catalog", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def fake_litellm(monkeypatch):
    """LiteLLM as the command sees it: a module with ``model_cost``."""
    module = types.SimpleNamespace(model_cost=MODEL_COST)
    monkeypatch.setitem(sys.modules, "litellm", module)
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    return module


@pytest.fixture
def catalog_file(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(CATALOG_YAML)
    return path


def test_it_adds_our_providers_models_from_litellm_offline(fake_litellm):
    output = run()
    assert output.strip().endswith("3 added, 0 changed, 0 unchanged")
    # Set before LiteLLM is imported, so it never reaches for the network.
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert sorted(PriceCatalogEntry.objects.values_list("model_id", flat=True)) == [
        "dashscope/qwen3-max",
        "deepseek/deepseek-chat",
        "openai/gpt-4o-mini",
    ]
    qwen = PriceCatalogEntry.objects.get(model_id="dashscope/qwen3-max")
    assert list(qwen.tiers.values_list("max_prompt_tokens", "input_cost_per_token")) == [
        (32_000, Decimal("0.0000012")),
        (None, Decimal("0.0000024")),
    ]


def test_a_second_run_changes_nothing(fake_litellm):
    run()
    assert run().strip().endswith("0 added, 0 changed, 3 unchanged")
    assert PriceCatalogEntry.objects.count() == 3


def test_a_dry_run_reports_and_saves_nothing(fake_litellm):
    output = run("--dry-run")
    assert "dry run, nothing saved: 3 added" in output
    assert PriceCatalogEntry.objects.count() == 0


def test_models_restricts_the_update(fake_litellm):
    assert (
        run("--models", "deepseek/deepseek-chat")
        .strip()
        .endswith("1 added, 0 changed, 0 unchanged")
    )
    assert list(PriceCatalogEntry.objects.values_list("model_id", flat=True)) == [
        "deepseek/deepseek-chat"
    ]
    with pytest.raises(CommandError, match="not in the catalog source: no/such"):
        run("--models", "deepseek/deepseek-chat,no/such")


def test_a_changed_price_adds_an_entry_and_keeps_past_costs(fake_litellm, alice_user):
    run()
    call = usage_record(
        run=run_for(alice_user),
        stage="worker",
        model_id="deepseek/deepseek-chat",
        usage=DEEPSEEK_USAGE,
        metadata=DEEPSEEK_METADATA,
    )
    changed = {
        **MODEL_COST,
        "deepseek/deepseek-chat": {
            **MODEL_COST["deepseek/deepseek-chat"],
            "output_cost_per_token": 1e-06,
        },
    }
    fake_litellm.model_cost = changed
    assert run().strip().endswith("0 added, 1 changed, 2 unchanged")
    entries = PriceCatalogEntry.objects.filter(model_id="deepseek/deepseek-chat")
    assert entries.count() == 2
    call.refresh_from_db()
    assert call.cost == DEEPSEEK_COST
    assert UsageRecord.objects.get().price_entry == entries.order_by("effective_from").first()


def test_it_reads_a_yaml_file(catalog_file):
    assert run(str(catalog_file)).strip().endswith("2 added, 0 changed, 0 unchanged")
    entry = PriceCatalogEntry.objects.get(model_id="dashscope/qwen-plus")
    assert entry.source == "vendor list 2026-03"
    assert entry.tiers.count() == 2
    assert run(str(catalog_file)).strip().endswith("0 added, 0 changed, 2 unchanged")


def test_it_reads_a_json_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "currency": "CNY",
                "effective_from": "2026-01-01T00:00:00Z",
                "models": {
                    "deepseek/deepseek-chat": {
                        "input_cost_per_token": "0.000002",
                        "output_cost_per_token": "0.000003",
                    }
                },
            }
        )
    )
    assert run(str(path)).strip().endswith("1 added, 0 changed, 0 unchanged")
    entry = PriceCatalogEntry.objects.get()
    assert (entry.currency, entry.source, entry.effective_from.year) == ("CNY", "prices.json", 2026)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("models: [unclosed", "not valid YAML"),
        (
            "models:\n  a/b: {input_cost_per_token: x, output_cost_per_token: 1}",
            "input_cost_per_token",
        ),
        ("nothing: here", "models"),
    ],
)
def test_a_bad_file_is_a_clear_error_that_changes_nothing(tmp_path, catalog_file, content, message):
    run(str(catalog_file))
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    with pytest.raises(CommandError, match=message):
        run(str(bad))
    assert PriceCatalogEntry.objects.count() == 2


def test_a_file_failing_half_way_leaves_the_catalog_as_it_was(tmp_path, catalog_file):
    """The second model's price goes back in time: the first model's entry is not kept."""
    run(str(catalog_file))
    path = tmp_path / "later.yaml"
    path.write_text(
        """
effective_from: 2000-01-01T00:00:00Z
models:
  aaa/new-model: {input_cost_per_token: "0.000001", output_cost_per_token: "0.000001"}
  deepseek/deepseek-chat: {input_cost_per_token: "0.000001", output_cost_per_token: "0.000001"}
"""
    )
    with pytest.raises(CommandError, match="later effective_from"):
        run(str(path))
    assert not PriceCatalogEntry.objects.filter(model_id="aaa/new-model").exists()
    assert PriceCatalogEntry.objects.count() == 2


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        run(str(tmp_path / "nope.yaml"))


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="LiteLLM is not installed")
def test_it_reads_litellms_real_bundled_catalog():
    run("--models", "deepseek/deepseek-chat,dashscope/qwen3-max")
    deepseek = PriceCatalogEntry.objects.get(model_id="deepseek/deepseek-chat")
    assert deepseek.tiers.get().cache_hit_cost_per_token is not None
    assert PriceCatalogEntry.objects.get(model_id="dashscope/qwen3-max").tiers.count() > 1
