"""Chat models by model id (docs/configuration.md, "Models"): ``demo``, the offline model;
``<provider>/<model>`` for DeepSeek, DashScope (Qwen) or any OpenAI-compatible endpoint, on
the lean OpenAI-compatible model (``openai_compatible``); ``anthropic/``, ``gemini/`` and
``ollama/<model>`` on AgentScope's own models (``sdk_models``); ``litellm/<model>`` for any
model LiteLLM reaches (``litellm_model``). Keys and endpoints come from the environment. The
last two modules, and their SDKs, are imported only when such a model is made."""

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agent_runs.runtime.demo_model import DEMO_MODEL_ID, DemoChatModel
from agent_runs.runtime.openai_compatible import OpenAICompatibleChatModel
from agent_runs.runtime.openai_dialects import endpoint_for

# Each provider's key and base URL settings.
PROVIDERS = {
    "deepseek": ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"),
    "dashscope": ("DASHSCOPE_API_KEY", "DASHSCOPE_BASE_URL"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
}


# Providers on their own SDKs (or LiteLLM's): each one's key setting (None: it needs none).
SDK_PROVIDERS: dict[str, str | None] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "ollama": None,
    "litellm": None,  # LiteLLM reads its providers' variables itself
}


@dataclass(frozen=True)
class ModelCall:
    """One LLM call's usage as reported (docs/spec/sse-events-and-usage.md 5.2): ``usage`` holds
    the direct fields AgentScope parsed, ``metadata`` the provider's raw usage object, which
    keeps what AgentScope drops (total, cache-miss and reasoning tokens, cost)."""

    model_id: str
    usage: dict[str, Any]
    metadata: dict[str, Any]
    # When the call ended (its trace's span ends there, runtime/tracing.py).
    ended_ns: int = field(default_factory=time.time_ns, compare=False)


@dataclass
class UsageLog:
    """The model calls of one stage, in order; the job stores them as they come.
    ``before_call``: awaited before each call a provider bills (the run's budget check)."""

    stage: str
    calls: list[ModelCall] = field(default_factory=list)
    before_call: Callable[[], Awaitable[None]] | None = None

    def drain(self) -> list[ModelCall]:
        calls, self.calls = self.calls, []
        return calls


def model_call(model_id: str, usage: ChatUsage | None) -> ModelCall:
    """A call's record: AgentScope's parsed fields, and the raw usage in their metadata."""
    if usage is None:
        return ModelCall(model_id, {}, {})
    direct = {key: value for key, value in usage.items() if key != "metadata"}
    return ModelCall(model_id, direct, dict(usage.metadata or {}))


class ProviderChatModel(OpenAICompatibleChatModel):
    """A provider's model that records each call into a ``UsageLog`` as the call ends,
    whichever path made it (the agent's reasoning or ``generate_structured_output``). Made
    per stage, so two runs' calls never share one."""

    def __init__(self, *, model_id: str, usage_log: UsageLog, **arguments: Any) -> None:
        super().__init__(**arguments)
        self.model_id = model_id
        self.usage_log = usage_log

    def call_ended(self, usage: ChatUsage | None) -> None:
        self.usage_log.calls.append(model_call(self.model_id, usage))

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        if self.usage_log.before_call is not None:
            await self.usage_log.before_call()
        return await super()._call_api(*args, **kwargs)


class DemoTrackingModel(DemoChatModel):
    """The demo model, its calls recorded like a provider's (they are not billed)."""

    def __init__(self, *, model_id: str, usage_log: UsageLog) -> None:
        super().__init__()
        self.model_id = model_id
        self.usage_log = usage_log

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        result = await super()._call_api(*args, **kwargs)
        if isinstance(result, ChatResponse):
            self.usage_log.calls.append(model_call(self.model_id, result.usage))
            return result
        return self._tracked(result)

    async def _tracked(self, chunks: AsyncIterator[ChatResponse]) -> AsyncGenerator[Any, None]:
        usage = None
        try:
            async for chunk in chunks:
                usage = chunk.usage or usage
                yield chunk
        finally:
            # Also when the stream breaks: a call that reported nothing is recorded too.
            self.usage_log.calls.append(model_call(self.model_id, usage))


def chat_model_for(
    model_id: str, *, usage_log: UsageLog | None = None, thinking: bool = False
) -> ChatModelBase:
    """The chat model for ``model_id``; every call it makes is recorded in ``usage_log``.
    A model per stage: it holds no connection (the running loop's client is shared) and no
    credential of its own (the provider's endpoint is made once). ``thinking`` turns the
    provider's thinking switch on (the demo model does not think)."""
    log = usage_log if usage_log is not None else UsageLog(stage="")
    if model_id == DEMO_MODEL_ID:
        return DemoTrackingModel(model_id=model_id, usage_log=log)
    provider, _, name = model_id.partition("/")
    if name and provider in SDK_PROVIDERS:
        return _sdk_model(provider, model_id=model_id, name=name, usage_log=log, thinking=thinking)
    names = PROVIDERS.get(provider)
    if names is None or not name:
        known = ", ".join(f"'{prefix}/<model>'" for prefix in (*PROVIDERS, *SDK_PROVIDERS))
        raise ImproperlyConfigured(f"unknown model id {model_id!r}: use 'demo', {known}")
    key_setting, base_url_setting = names
    api_key = getattr(settings, key_setting)
    if not api_key:
        raise ImproperlyConfigured(f"{model_id} needs {key_setting}")
    return ProviderChatModel(
        model_id=model_id,
        usage_log=log,
        endpoint=endpoint_for(provider, api_key, getattr(settings, base_url_setting) or ""),
        model=name,
        **_call_settings(thinking),
    )


def _call_settings(thinking: bool) -> dict[str, Any]:
    """What every provider's model is made with: its calls' retries, timeout, thinking."""
    return {
        "max_retries": settings.AGENT_MODEL_MAX_RETRIES,
        "retry_delay": settings.AGENT_MODEL_RETRY_DELAY_SECONDS,
        "timeout": settings.AGENT_MODEL_TIMEOUT_SECONDS,
        "thinking": thinking,
    }


def _sdk_model(
    provider: str, *, model_id: str, name: str, usage_log: UsageLog, thinking: bool
) -> ChatModelBase:
    """An ``anthropic/``, ``gemini/``, ``ollama/`` or ``litellm/`` model."""
    key_setting = SDK_PROVIDERS[provider]
    api_key = getattr(settings, key_setting) if key_setting else ""
    if key_setting and not api_key:
        raise ImproperlyConfigured(f"{model_id} needs {key_setting}")
    common: dict[str, Any] = {
        "model_id": model_id,
        "usage_log": usage_log,
        "model": name,
        **_call_settings(thinking),
    }
    # Imported here: their SDKs (LiteLLM's import takes seconds) only when configured.
    if provider == "litellm":
        from agent_runs.runtime.litellm_model import LiteLLMChatModel

        return LiteLLMChatModel(**common)
    from agent_runs.runtime import sdk_models

    if provider == "anthropic":
        return sdk_models.AnthropicModel(
            **common, api_key=api_key, base_url=settings.ANTHROPIC_BASE_URL
        )
    if provider == "gemini":
        return sdk_models.GeminiModel(**common, api_key=api_key, base_url=settings.GEMINI_BASE_URL)
    return sdk_models.OllamaModel(**common, base_url=settings.OLLAMA_BASE_URL)
