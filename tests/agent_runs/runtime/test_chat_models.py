"""Model ids to chat models (agent_runs/runtime/chat_models.py), without a network."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent_runs.runtime import sdk_models
from agent_runs.runtime.chat_models import UsageLog, chat_model_for


@pytest.mark.parametrize(
    ("model_id", "key_setting"),
    [
        ("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-flash", "GEMINI_API_KEY"),
    ],
)
def test_a_provider_model_without_its_key_is_a_configuration_error(settings, model_id, key_setting):
    setattr(settings, key_setting, "")
    with pytest.raises(ImproperlyConfigured, match=f"{model_id} needs {key_setting}"):
        chat_model_for(model_id)


def test_each_provider_prefix_makes_its_model_with_the_name_after_the_prefix(settings):
    settings.ANTHROPIC_API_KEY = settings.GEMINI_API_KEY = "key"
    log = UsageLog(stage="worker")
    made = {
        model_id: chat_model_for(model_id, usage_log=log, thinking=True)
        for model_id in (
            "anthropic/claude-haiku-4-5",
            "gemini/gemini-2.5-flash",
            "ollama/qwen3:14b",
        )
    }
    assert isinstance(made["anthropic/claude-haiku-4-5"], sdk_models.AnthropicModel)
    assert isinstance(made["gemini/gemini-2.5-flash"], sdk_models.GeminiModel)
    assert isinstance(made["ollama/qwen3:14b"], sdk_models.OllamaModel)  # no key needed
    assert [model.model for model in made.values()] == [
        "claude-haiku-4-5",
        "gemini-2.5-flash",
        "qwen3:14b",
    ]
    for model in made.values():
        assert isinstance(model, sdk_models.RecordedSDKModel) and model.usage_log is log
        assert getattr(model.parameters, "thinking_enable", None) is True


def test_an_unknown_prefix_names_every_known_one():
    with pytest.raises(ImproperlyConfigured) as raised:
        chat_model_for("acme/model-1")
    for prefix in ("deepseek", "dashscope", "openai", "anthropic", "gemini", "ollama", "litellm"):
        assert f"'{prefix}/<model>'" in str(raised.value)
