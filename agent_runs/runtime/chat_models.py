"""Chat models by model id (docs/configuration.md, "Models"): ``demo``, the offline model,
or ``<provider>/<model>`` for DeepSeek, DashScope (Qwen) or any OpenAI-compatible endpoint.
Keys and endpoints come from the environment."""

import asyncio
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai
from agentscope.credential import DashScopeCredential, DeepSeekCredential, OpenAICredential
from agentscope.model import (
    ChatModelBase,
    ChatResponse,
    ChatUsage,
    DashScopeChatModel,
    DeepSeekChatModel,
    OpenAIChatModel,
)
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agent_runs.runtime.async_bridge import bridge_loop
from agent_runs.runtime.demo_model import DEMO_MODEL_ID, DemoChatModel


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


@dataclass(frozen=True)
class ModelCall:
    """One LLM call's usage as reported (docs/spec/sse-events-and-usage.md 5.2): ``usage`` holds
    the direct fields AgentScope parsed, ``metadata`` the provider's raw usage object, which
    keeps what AgentScope drops (total, cache-miss and reasoning tokens, cost)."""

    model_id: str
    usage: dict[str, Any]
    metadata: dict[str, Any]


@dataclass
class UsageLog:
    """The model calls of one stage, in order; the job stores them as they come."""

    stage: str
    calls: list[ModelCall] = field(default_factory=list)

    def drain(self) -> list[ModelCall]:
        calls, self.calls = self.calls, []
        return calls


class UsageTracking(ChatModelBase):
    """Records every call of an AgentScope chat model into a ``UsageLog``, whichever path
    made it (the agent's reasoning or ``generate_structured_output``, which skips
    ``__call__``): the one place every call passes is ``_call_api``."""

    model_id: str
    usage_log: UsageLog
    _raw_usage: dict[str, Any] | None = None

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        self._raw_usage = None
        # The provider class after this mixin implements it.
        result = await super()._call_api(*args, **kwargs)  # type: ignore[safe-super]
        if isinstance(result, ChatResponse):
            self._record(result.usage)
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
            self._record(usage)

    def _parse_stream_response(self, start_datetime: Any, response: Any, *args: Any) -> Any:
        parse = super()._parse_stream_response  # type: ignore[misc]  # on each provider class
        return parse(start_datetime, _RawUsageTap(response, self), *args)

    def _parse_completion_response(self, start_datetime: Any, response: Any, *args: Any) -> Any:
        self._raw_usage = _as_dict(getattr(response, "usage", None))
        parse = super()._parse_completion_response  # type: ignore[misc]  # as above
        return parse(start_datetime, response, *args)

    def _record(self, usage: ChatUsage | None) -> None:
        direct = {} if usage is None else {k: v for k, v in usage.items() if k != "metadata"}
        raw = self._raw_usage or (usage.metadata if usage is not None else None) or {}
        self.usage_log.calls.append(ModelCall(self.model_id, direct, dict(raw)))


class _RawUsageTap:
    """Wraps the provider SDK's stream to keep its raw ``usage`` object as it passes."""

    def __init__(self, response: Any, model: UsageTracking) -> None:
        self._response = response
        self._model = model
        self._stream: Any = None

    async def __aenter__(self) -> "_RawUsageTap":
        self._stream = await self._response.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._response.__aexit__(*exc)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks()

    async def _chunks(self) -> AsyncGenerator[Any, None]:
        async for chunk in self._stream:
            raw = _as_dict(getattr(chunk, "usage", None))
            if raw:
                self._model._raw_usage = raw
            yield chunk


def _as_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        dumped: dict[str, Any] = usage.model_dump(mode="json")
        return dumped
    return dict(usage) if isinstance(usage, dict) else None


_TRACKED_CLASSES: dict[type[ChatModelBase], type[ChatModelBase]] = {}


def _tracked_class(model_class: type[ChatModelBase]) -> type[ChatModelBase]:
    if model_class not in _TRACKED_CLASSES:
        name = f"Tracking{model_class.__name__}"
        _TRACKED_CLASSES[model_class] = type(name, (UsageTracking, model_class), {})
    return _TRACKED_CLASSES[model_class]


def chat_model_for(model_id: str, *, usage_log: UsageLog | None = None) -> UsageTracking:
    """The chat model for ``model_id``; every call it makes is recorded in ``usage_log``."""
    model_class, arguments = _model_spec(model_id)
    model: UsageTracking = _tracked_class(model_class)(**arguments)  # type: ignore[assignment]
    model.model_id = model_id
    model.usage_log = usage_log if usage_log is not None else UsageLog(stage="")
    return model


def _model_spec(model_id: str) -> tuple[type[ChatModelBase], dict[str, Any]]:
    if model_id == DEMO_MODEL_ID:
        return DemoChatModel, {}
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
    return provider.model_class, {
        "credential": provider.credential_class(**credential_fields),
        "model": name,
        "max_retries": settings.AGENT_MODEL_MAX_RETRIES,
        "retry_delay": settings.AGENT_MODEL_RETRY_DELAY_SECONDS,
        "client_kwargs": {
            # One retry layer only: AgentScope's, configured above.
            "max_retries": 0,
            "timeout": settings.AGENT_MODEL_TIMEOUT_SECONDS,
            "http_client": provider_http_client(bridge_loop()),
        },
    }


_HTTP_CLIENTS: (
    "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.DefaultAsyncHttpxClient]"
)
_HTTP_CLIENTS = weakref.WeakKeyDictionary()


def provider_http_client(loop: asyncio.AbstractEventLoop) -> openai.DefaultAsyncHttpxClient:
    """The HTTP client every provider model driven on ``loop`` shares. A client of its own
    per model call cost a run more CPU than the rest of the run (a TLS context is built with
    each, tens of milliseconds) and a new connection per call; this one keeps its
    connections alive from one call, and one run, to the next. Its connections belong to the
    loop, hence one per loop."""
    client = _HTTP_CLIENTS.get(loop)
    if client is None:
        client = _HTTP_CLIENTS[loop] = openai.DefaultAsyncHttpxClient()
    return client
