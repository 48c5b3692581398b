"""What the SDK models share (runtime/sdk_models/): each loop's SDK clients, the stream each
call's items are observed on, and ``RecordedSDKModel``, their base: the budget check before
each call, the loop's client, the SDK's errors raised as ``ProviderError``s and a record of
each streamed call as it ends."""

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse, ChatUsage

from agent_runs.runtime.chat_models import ModelCall, UsageLog
from agent_runs.runtime.provider_errors import ProviderRetries, provider_error

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


class RecordedSDKModel(ProviderRetries, ChatModelBase):
    """What the three models share: the budget check before each call, the loop's client,
    and a record of each streamed call (also one broken off or cancelled) as it ends."""

    model_id: str
    usage_log: UsageLog
    client: Any

    # Each provider's name, AgentScope parameters class, formatter class and context size.
    SDK_NAME: str
    SDK_PARAMETERS: type[Any]
    SDK_FORMATTER: type[Any]
    SDK_CONTEXT_SIZE: int

    def __init__(
        self,
        *,
        model_id: str,
        usage_log: UsageLog,
        model: str,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        thinking: bool,
        api_key: str = "",
        base_url: str = "",
    ) -> None:
        # AgentScope's __init__ makes an SDK client per model: here the loop's is used.
        ChatModelBase.__init__(
            self,
            credential=self._credential(api_key, base_url),
            model=model,
            parameters=self.SDK_PARAMETERS(thinking_enable=thinking),
            stream=True,
            max_retries=max_retries,
            retry_delay=retry_delay,
            context_size=self.SDK_CONTEXT_SIZE,
        )
        self.formatter = self.SDK_FORMATTER()
        self.client_kwargs = self._client_kwargs(timeout, base_url)
        self.model_id = model_id
        self.usage_log = usage_log
        self.client_key = (self.SDK_NAME, api_key, base_url, str(timeout))

    def _credential(self, api_key: str, base_url: str) -> Any:
        raise NotImplementedError

    def _client_kwargs(self, timeout: float, base_url: str) -> dict[str, Any]:
        """The SDK client's options but its key and base URL."""
        return {"timeout": timeout}

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        raise NotImplementedError

    @classmethod
    def _sdk_errors(cls) -> tuple[type[Exception], ...]:
        """The SDK's errors (and its transport's), raised as ``ProviderError``s."""
        raise NotImplementedError

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


def dumped(value: Any) -> dict[str, Any]:
    """An SDK's usage object as the provider sent it (its wire names)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    dumped: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped
