"""Anthropic, Gemini and Ollama models: AgentScope's own chat models on their providers'
SDKs (docs/configuration.md, "Models"), each call recorded into the stage's ``UsageLog``
with the provider's raw usage object, which AgentScope's parsing drops (spec
sse-events-and-usage.md 5.2: the metadata fills what the direct fields lack).

This module, and the SDKs it uses, are imported only when such a model is configured
(``chat_model_for``): the worker of an OpenAI-compatible provider never loads them.

An SDK's client holds a connection pool bound to its event loop: one is made per loop and
configuration on the first call and kept for the next ones (a model is made per stage), as
the lean OpenAI-compatible path keeps its own (runtime/openai_compatible.py). The SDKs'
own retries are off: AgentScope retries (``AGENT_MODEL_MAX_RETRIES``), no layer below it.

An SDK's error is raised as the lean path's ``ProviderError`` of the same kind (connection,
timeout, the status's class): the same errors are retried (a connection error, a timeout, a
429, a 5xx) and a run that fails on one ends with the ``model_error`` code, whatever the
provider.
"""

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

from agentscope.credential import AnthropicCredential, GeminiCredential, OllamaCredential
from agentscope.formatter import (
    AnthropicChatFormatter,
    GeminiChatFormatter,
    OllamaChatFormatter,
)
from agentscope.model import (
    AnthropicChatModel,
    ChatModelBase,
    ChatResponse,
    ChatUsage,
    GeminiChatModel,
    OllamaChatModel,
)

from agent_runs.runtime.chat_models import ModelCall, UsageLog
from agent_runs.runtime.openai_compatible import (
    RETRYABLE_ERRORS,
    STRUCTURED_OUTPUT_FALLBACK_ERRORS,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    status_error,
)

# A loop's SDK clients, by configuration: (client, its close coroutine function).
_Clients = dict[tuple[str, ...], tuple[Any, Callable[[], Awaitable[Any]]]]
_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clients]"
_CLIENTS = weakref.WeakKeyDictionary()
_CLIENTS_LOCK = threading.Lock()


def _loop_client(key: tuple[str, ...], make: Callable[[], tuple[Any, Any]]) -> Any:
    """The running loop's client for ``key``, made by ``make`` (client, close) on first use."""
    loop = asyncio.get_running_loop()
    with _CLIENTS_LOCK:
        clients = _CLIENTS.setdefault(loop, {})
        if key not in clients:
            clients[key] = make()
        return clients[key][0]


async def sdk_clients_close() -> None:
    """Close the running loop's SDK clients (the loop's owner stops)."""
    for _client, close in _CLIENTS.pop(asyncio.get_running_loop(), {}).values():
        await close()


class _Observed:
    """An SDK's stream, each item shown to ``observe`` as AgentScope's parser reads it (the
    parser keeps only the fields it maps). ``aclose`` closes the SDK's stream, and its
    connection, at once, also when the parser left it unfinished (a cancel)."""

    def __init__(self, stream: Any, observe: Callable[[Any], None]) -> None:
        self._stream = stream
        self._observe = observe
        self._iterator: AsyncGenerator[Any, None] | None = None
        self.items = 0  # read so far

    async def __aenter__(self) -> "_Observed":
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> AsyncIterator[Any]:
        if self._iterator is None:
            self._iterator = self._items()
        return self._iterator

    async def aclose(self) -> None:
        if self._iterator is not None:
            await self._iterator.aclose()  # closes the stream as it ends
        else:
            await _close(self._stream)

    async def _items(self) -> AsyncGenerator[Any, None]:
        try:
            async for item in self._stream:
                self.items += 1
                self._observe(item)
                yield item
        finally:
            await _close(self._stream)


def provider_error(exc: Exception) -> ProviderError:
    """The lean path's error for an SDK's: by its HTTP status if it has one (``status_code``;
    google-genai's ``code``), else a timeout or a connection error."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return ProviderTimeoutError()
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(exc, "code", None)
    if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
        return status_error(status, message, body=getattr(exc, "body", None))
    return ProviderConnectionError(message)


async def _primed(chunks: AsyncGenerator[ChatResponse, None]) -> AsyncGenerator[ChatResponse, None]:
    """``chunks`` with its first chunk read already (its errors raised here)."""
    try:
        first = await chunks.__anext__()
    except StopAsyncIteration:
        return _after(None, chunks)
    return _after(first, chunks)


async def _after(
    first: ChatResponse | None, chunks: AsyncGenerator[ChatResponse, None]
) -> AsyncGenerator[ChatResponse, None]:
    try:
        if first is not None:
            yield first
            async for chunk in chunks:
                yield chunk
    finally:
        await chunks.aclose()


async def _close(stream: Any) -> None:
    """Close an SDK's stream: an async generator (Gemini's, Ollama's) or Anthropic's."""
    close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if close is not None:
        await close()


class RecordedSDKModel(ChatModelBase):
    """What the three models share: the budget check before each call, the loop's client,
    and a record of each streamed call (also one broken off or cancelled) as it ends."""

    model_id: str
    usage_log: UsageLog
    client: Any

    def _setup(self, *, model_id: str, usage_log: UsageLog, client_key: tuple[str, ...]) -> None:
        self.model_id = model_id
        self.usage_log = usage_log
        self.client_key = client_key

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        raise NotImplementedError

    @classmethod
    def _sdk_errors(cls) -> tuple[type[Exception], ...]:
        """The SDK's errors (and its transport's), raised as ``ProviderError``s."""
        raise NotImplementedError

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return RETRYABLE_ERRORS

    @classmethod
    def _get_structured_output_fallback_exceptions(cls) -> tuple[type[Exception], ...]:
        return STRUCTURED_OUTPUT_FALLBACK_ERRORS

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        if self.usage_log.before_call is not None:
            await self.usage_log.before_call()
        self.client = _loop_client(self.client_key, self._make_client)
        try:
            # The provider's AgentScope class, after this one in the MRO, implements it.
            result = await super()._call_api(*args, **kwargs)  # type: ignore[safe-super]
        except self._sdk_errors() as exc:
            raise provider_error(exc) from exc
        # Gemini's and Ollama's SDKs send the request when their stream is first read: read
        # the first chunk here, so that an error before any (a 5xx) is retried as the lean
        # path retries it.
        return await _primed(result) if isinstance(result, AsyncGenerator) else result

    def _observe(self, raw: dict[str, Any], item: Any) -> None:
        """Keep the provider's usage object of a streamed item in ``raw``."""
        raise NotImplementedError

    def _call_record(
        self, usage: ChatUsage | None, raw: dict[str, Any], seconds: float
    ) -> ModelCall:
        """The call's record, from AgentScope's last usage and the provider's raw usage."""
        raise NotImplementedError

    def _recorded(
        self,
        parse: Callable[[datetime, Any], AsyncGenerator[ChatResponse, None]],
        started: datetime,
        response: Any,
    ) -> AsyncGenerator[ChatResponse, None]:
        raw: dict[str, Any] = {}
        observed = _Observed(response, lambda item: self._observe(raw, item))
        return self._recording(parse(started, observed), observed, raw, started)

    async def _recording(
        self,
        chunks: AsyncGenerator[ChatResponse, None],
        observed: _Observed,
        raw: dict[str, Any],
        started: datetime,
    ) -> AsyncGenerator[ChatResponse, None]:
        usage = None
        answered = True
        try:
            async for chunk in chunks:
                usage = chunk.usage or usage
                yield chunk
        except self._sdk_errors() as exc:  # the request failed, or its stream broke off
            answered = observed.items > 0
            raise provider_error(exc) from exc
        finally:
            try:
                await chunks.aclose()
                await observed.aclose()  # the SDK's stream and its connection with it
            finally:
                # A call the provider refused before answering anything is no model call
                # (as a refused request of the lean path).
                if answered:
                    seconds = (datetime.now() - started).total_seconds()
                    self.usage_log.calls.append(self._call_record(usage, raw, seconds))


def _dumped(value: Any) -> dict[str, Any]:
    """An SDK's usage object as the provider sent it (its wire names)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    dumped: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


# Anthropic ---------------------------------------------------------------------------------


class AnthropicModel(RecordedSDKModel, AnthropicChatModel):
    """``anthropic/<model>``. Anthropic's ``input_tokens`` leaves out the prompt's tokens read
    from and written to its cache: the record's ``input_tokens`` is the whole prompt, as the
    spec's (5.3), and ``cache_input_tokens`` / ``cache_creation_input_tokens`` its parts."""

    def __init__(
        self,
        *,
        model_id: str,
        usage_log: UsageLog,
        model: str,
        api_key: str,
        base_url: str,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        thinking: bool,
    ) -> None:
        # AgentScope's __init__ makes an SDK client per model: here the loop's is used.
        ChatModelBase.__init__(
            self,
            credential=AnthropicCredential(api_key=api_key, base_url=base_url or None),
            model=model,
            parameters=AnthropicChatModel.Parameters(thinking_enable=thinking),
            stream=True,
            max_retries=max_retries,
            retry_delay=retry_delay,
            context_size=200000,
        )
        self.formatter = AnthropicChatFormatter()
        self.client_kwargs = {"timeout": timeout}
        self._setup(
            model_id=model_id,
            usage_log=usage_log,
            client_key=("anthropic", api_key, base_url, str(timeout)),
        )

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        import anthropic

        _, api_key, base_url, _ = self.client_key
        client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or None,
            max_retries=0,
            **self.client_kwargs,
        )
        return client, client.close

    @classmethod
    def _sdk_errors(cls) -> tuple[type[Exception], ...]:
        import anthropic

        return (anthropic.APIError,)

    def _parse_anthropic_stream_completion_response(
        self, start_datetime: datetime, response: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        parse = super()._parse_anthropic_stream_completion_response
        return self._recorded(parse, start_datetime, response)

    def _observe(self, raw: dict[str, Any], item: Any) -> None:
        if item.type == "message_start":
            raw.update(_dumped(item.message.usage))
        elif item.type == "message_delta":
            raw.update(_dumped(item.usage))  # the final output count (and any others)

    def _call_record(
        self, usage: ChatUsage | None, raw: dict[str, Any], seconds: float
    ) -> ModelCall:
        if raw.get("input_tokens") is None or raw.get("output_tokens") is None:
            return ModelCall(self.model_id, {}, raw)
        read = raw.get("cache_read_input_tokens") or 0
        written = raw.get("cache_creation_input_tokens") or 0
        direct = {
            "input_tokens": raw["input_tokens"] + read + written,
            "output_tokens": raw["output_tokens"],
            "time": seconds,
            "cache_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
        return ModelCall(self.model_id, direct, raw)


# Gemini ------------------------------------------------------------------------------------


class GeminiModel(RecordedSDKModel, GeminiChatModel):
    """``gemini/<model>``, the Gemini API's ``streamGenerateContent``. The record's tokens are
    AgentScope's (the prompt with its tool-use prompt; the output with the thoughts); the
    raw ``usageMetadata`` keeps ``thoughtsTokenCount`` and ``cachedContentTokenCount``."""

    def __init__(
        self,
        *,
        model_id: str,
        usage_log: UsageLog,
        model: str,
        api_key: str,
        base_url: str,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        thinking: bool,
    ) -> None:
        ChatModelBase.__init__(
            self,
            credential=GeminiCredential(api_key=api_key),
            model=model,
            parameters=GeminiChatModel.Parameters(thinking_enable=thinking),
            stream=True,
            max_retries=max_retries,
            retry_delay=retry_delay,
            context_size=1048576,
        )
        self.formatter = GeminiChatFormatter()
        http_options: dict[str, Any] = {"timeout": int(timeout * 1000)}  # milliseconds
        if base_url:
            http_options["base_url"] = base_url
        self.client_kwargs = {"http_options": http_options}
        self._setup(
            model_id=model_id,
            usage_log=usage_log,
            client_key=("gemini", api_key, base_url, str(timeout)),
        )

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        from google import genai

        client = genai.Client(api_key=self.client_key[1], **self.client_kwargs)
        return client, client.aio.aclose

    @classmethod
    def _sdk_errors(cls) -> tuple[type[Exception], ...]:
        import aiohttp
        import httpx
        from google.genai import errors

        return (errors.APIError, httpx.HTTPError, aiohttp.ClientError)

    def _parse_stream_response(
        self, start_datetime: datetime, response: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        return self._recorded(super()._parse_stream_response, start_datetime, response)

    def _observe(self, raw: dict[str, Any], item: Any) -> None:
        if item.usage_metadata is not None:  # each chunk's is the call's so far
            raw.clear()
            raw.update(_dumped(item.usage_metadata))

    def _call_record(
        self, usage: ChatUsage | None, raw: dict[str, Any], seconds: float
    ) -> ModelCall:
        if usage is None:
            return ModelCall(self.model_id, {}, raw)
        direct = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "time": seconds,
            "cache_input_tokens": usage.cache_input_tokens,
        }
        return ModelCall(self.model_id, direct, raw)


# Ollama ------------------------------------------------------------------------------------

_OLLAMA_COUNTS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


class OllamaModel(RecordedSDKModel, OllamaChatModel):
    """``ollama/<model>``, Ollama's ``/api/chat``: its last (``done``) chunk counts the
    prompt (``prompt_eval_count``) and the answer (``eval_count``)."""

    def __init__(
        self,
        *,
        model_id: str,
        usage_log: UsageLog,
        model: str,
        base_url: str,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        thinking: bool,
    ) -> None:
        ChatModelBase.__init__(
            self,
            credential=OllamaCredential(**({"host": base_url} if base_url else {})),
            model=model,
            parameters=OllamaChatModel.Parameters(thinking_enable=thinking),
            stream=True,
            max_retries=max_retries,
            retry_delay=retry_delay,
            context_size=32768,
        )
        self.formatter = OllamaChatFormatter()
        self.client_kwargs = {"timeout": timeout}
        self._setup(
            model_id=model_id,
            usage_log=usage_log,
            client_key=("ollama", base_url, str(timeout)),
        )

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        import ollama

        client = ollama.AsyncClient(host=self.client_key[1] or None, **self.client_kwargs)
        return client, client._client.aclose

    @classmethod
    def _sdk_errors(cls) -> tuple[type[Exception], ...]:
        import httpx
        import ollama

        return (ollama.ResponseError, httpx.HTTPError)

    def _parse_stream_response(
        self, start_datetime: datetime, response: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        return self._recorded(super()._parse_stream_response, start_datetime, response)

    def _observe(self, raw: dict[str, Any], item: Any) -> None:
        if getattr(item, "done", False):
            raw.update(
                {
                    key: getattr(item, key)
                    for key in _OLLAMA_COUNTS
                    if getattr(item, key, None) is not None
                }
            )

    def _call_record(
        self, usage: ChatUsage | None, raw: dict[str, Any], seconds: float
    ) -> ModelCall:
        if raw.get("prompt_eval_count") is None or raw.get("eval_count") is None:
            return ModelCall(self.model_id, {}, raw)
        direct = {
            "input_tokens": raw["prompt_eval_count"],
            "output_tokens": raw["eval_count"],
            "time": seconds,
        }
        return ModelCall(self.model_id, direct, raw)
