"""Chat models by model id (DESIGN.md, "Model configuration"): ``demo``, the offline model,
or ``<provider>/<model>`` for DeepSeek, DashScope (Qwen) or any OpenAI-compatible endpoint.
Keys and endpoints come from the environment."""

from dataclasses import dataclass
from typing import Any

from agentscope.credential import DashScopeCredential, DeepSeekCredential, OpenAICredential
from agentscope.model import (
    ChatModelBase,
    DashScopeChatModel,
    DeepSeekChatModel,
    OpenAIChatModel,
)
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agent_runs.demo_model import DEMO_MODEL_ID, DemoChatModel


@dataclass(frozen=True)
class Provider:
    model_class: type[ChatModelBase]
    credential_class: type[Any]
    key_setting: str
    base_url_setting: str


PROVIDERS = {
    "deepseek": Provider(
        DeepSeekChatModel, DeepSeekCredential, "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"
    ),
    "dashscope": Provider(
        DashScopeChatModel, DashScopeCredential, "DASHSCOPE_API_KEY", "DASHSCOPE_BASE_URL"
    ),
    "openai": Provider(OpenAIChatModel, OpenAICredential, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
}


def chat_model_for(model_id: str) -> ChatModelBase:
    if model_id == DEMO_MODEL_ID:
        return DemoChatModel()
    provider_name, _, name = model_id.partition("/")
    provider = PROVIDERS.get(provider_name)
    if provider is None or not name:
        known = ", ".join(f"'{prefix}/<model>'" for prefix in PROVIDERS)
        raise ImproperlyConfigured(f"unknown model id {model_id!r}: use 'demo', {known}")
    api_key = getattr(settings, provider.key_setting)
    if not api_key:
        raise ImproperlyConfigured(f"{model_id} needs {provider.key_setting}")
    credential_fields: dict[str, Any] = {"api_key": api_key}
    base_url = getattr(settings, provider.base_url_setting)
    if base_url:
        credential_fields["base_url"] = base_url
    model: ChatModelBase = provider.model_class(  # type: ignore[call-arg]  # all three take these
        credential=provider.credential_class(**credential_fields),
        model=name,
        max_retries=settings.AGENT_MODEL_MAX_RETRIES,
        retry_delay=settings.AGENT_MODEL_RETRY_DELAY_SECONDS,
        # One retry layer only: AgentScope's, configured above.
        client_kwargs={"max_retries": 0, "timeout": settings.AGENT_MODEL_TIMEOUT_SECONDS},
    )
    return model
