"""A lean OpenAI-compatible streaming chat model under AgentScope's ``ChatModelBase``
(docs/architecture.md, "Models, tools and runtime modes").

It sends what AgentScope's ``OpenAIChatModel``, ``DeepSeekChatModel`` and
``DashScopeChatModel`` send (their formatters' messages, the tools and ``tool_choice``, each
provider's thinking switch, off unless the model is made with ``thinking=True``,
``stream_options.include_usage``) and yields the same
``ChatResponse`` deltas their ``_parse_stream_response`` yields, without the ``openai`` SDK:
the SSE body is read line by line and each ``data:`` line is one ``json.loads``, with no
pydantic object per chunk. What the SDK cost per call is gone too: the client (an aiohttp
session: one connection pool, one TLS context; runtime/provider_transport.py) is made once per
provider base URL and event loop, the endpoint (URL, headers, credential) once per provider
configuration.

Errors are this module's ``ProviderError`` classes, shaped as the SDK's (a connection error,
a timeout, a status error per status the SDK names); AgentScope retries a connection error,
a timeout, a 429 and a 5xx raised before any chunk, as it retries the SDK's. So a worker
never needs the SDK (AgentScope's own import of it is deferred: runtime/lazy_imports.py).
Everything a call keeps while it streams is in its own ``ChunkStream``: calls on one loop
share nothing mutable but the connection pool.
"""

import asyncio
import atexit
import json
import ssl
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import aiohttp
import httpx
from agentscope._utils._common import _flatten_json_schema, _generate_id
from agentscope.credential import (
    CredentialBase,
    DashScopeCredential,
    DeepSeekCredential,
    OpenAICredential,
)
from agentscope.formatter import (
    DashScopeChatFormatter,
    DeepSeekChatFormatter,
    FormatterBase,
    OpenAIChatFormatter,
)
from agentscope.message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from agentscope.tool import ToolChoice
from pydantic import BaseModel

from agent_runs.runtime.provider_transport import provider_session

_TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


class ProviderError(Exception):
    """A model call failed at the provider: ``body`` is the error object it sent, if any."""

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class ProviderConnectionError(ProviderError):
    """The request got no (whole) answer."""


class ProviderTimeoutError(ProviderConnectionError):
    def __init__(self) -> None:
        super().__init__("Request timed out.")


class ProviderStatusError(ProviderError):
    """The provider answered 4xx or 5xx."""

    def __init__(self, message: str, *, status_code: int, body: Any = None) -> None:
        super().__init__(message, body=body)
        self.status_code = status_code


class BadRequestError(ProviderStatusError):
    """400: the request is wrong, retrying it is useless."""


class AuthenticationError(ProviderStatusError):
    """401."""


class PermissionDeniedError(ProviderStatusError):
    """403."""


class NotFoundError(ProviderStatusError):
    """404."""


class ConflictError(ProviderStatusError):
    """409."""


class UnprocessableEntityError(ProviderStatusError):
    """422."""


class RateLimitError(ProviderStatusError):
    """429: retried."""


class InternalServerError(ProviderStatusError):
    """5xx: retried."""


# The one retry policy of every provider path (this lean one, the SDK models, LiteLLM): the
# errors AgentScope retries, and those after which a structured output falls back to a
# plain call.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    ProviderConnectionError,
    RateLimitError,
    InternalServerError,
)
STRUCTURED_OUTPUT_FALLBACK_ERRORS: tuple[type[Exception], ...] = (BadRequestError,)


@dataclass(frozen=True)
class Dialect:
    """What one provider's AgentScope model does differently on the same wire format."""

    name: str
    default_base_url: str
    credential_class: type[CredentialBase]
    formatter: FormatterBase  # stateless: one for every call
    context_size: int  # AgentScope's default for the provider (context compression)
    # The request's thinking switch, off (AgentScope's default) or on, given the body and
    # the caller's extra body fields (which win: the structured output's ``no_think``). A
    # model that always reasons (``deepseek-reasoner``) reasons either way, and its
    # reasoning is parsed whatever the switch says.
    thinking_off: Callable[[dict[str, Any]], None]
    thinking_on: Callable[[dict[str, Any]], None]
    disable_thinking_kwargs: dict[str, Any]  # for generate_structured_output's no_think
    cached_tokens: Callable[[dict[str, Any]], int]
    reasoning_fallback: bool = False  # OpenAI's model also reads ``delta.reasoning``
    flatten_tool_schemas: bool = False  # OpenAI's model inlines $ref / $defs
    required_tool_choice: str = "required"  # DashScope's model sends "auto" instead


def _deepseek_thinking_off(body: dict[str, Any]) -> None:
    body["thinking"] = {"type": "disabled", **(body.get("thinking") or {})}


def _deepseek_thinking_on(body: dict[str, Any]) -> None:
    body["thinking"] = {"type": "enabled", **(body.get("thinking") or {})}


def _dashscope_thinking_off(body: dict[str, Any]) -> None:
    body.setdefault("enable_thinking", False)


def _dashscope_thinking_on(body: dict[str, Any]) -> None:
    body.setdefault("enable_thinking", True)


def _no_thinking_switch(body: dict[str, Any]) -> None:
    pass


def _details_cached_tokens(usage: dict[str, Any]) -> int:
    details = usage.get("prompt_tokens_details")
    return (details.get("cached_tokens") or 0) if isinstance(details, dict) else 0


def _deepseek_cached_tokens(usage: dict[str, Any]) -> int:
    return usage.get("prompt_cache_hit_tokens") or 0


DIALECTS = {
    "deepseek": Dialect(
        name="deepseek",
        default_base_url="https://api.deepseek.com",
        credential_class=DeepSeekCredential,
        formatter=DeepSeekChatFormatter(),
        context_size=65536,
        thinking_off=_deepseek_thinking_off,
        thinking_on=_deepseek_thinking_on,
        disable_thinking_kwargs={"extra_body": {"thinking": {"type": "disabled"}}},
        cached_tokens=_deepseek_cached_tokens,
    ),
    "dashscope": Dialect(
        name="dashscope",
        default_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
        credential_class=DashScopeCredential,
        formatter=DashScopeChatFormatter(),
        context_size=131072,
        thinking_off=_dashscope_thinking_off,
        thinking_on=_dashscope_thinking_on,
        disable_thinking_kwargs={"extra_body": {"enable_thinking": False}},
        cached_tokens=_details_cached_tokens,
        required_tool_choice="auto",
    ),
    "openai": Dialect(
        name="openai",
        default_base_url="https://api.openai.com/v1",
        credential_class=OpenAICredential,
        formatter=OpenAIChatFormatter(),
        context_size=128000,
        thinking_off=_no_thinking_switch,
        thinking_on=_no_thinking_switch,
        disable_thinking_kwargs={},
        cached_tokens=_details_cached_tokens,
        reasoning_fallback=True,
        flatten_tool_schemas=True,
    ),
}


@dataclass(frozen=True)
class Endpoint:
    """A provider configuration: made once (``endpoint_for``), shared by every call."""

    dialect: Dialect
    base_url: str
    url: str
    headers: dict[str, str]
    credential: CredentialBase


@lru_cache(maxsize=64)
def endpoint_for(provider: str, api_key: str, base_url: str) -> Endpoint:
    """The endpoint of ``provider`` with this key and base URL (empty: the provider's)."""
    dialect = DIALECTS[provider]
    base = (base_url or dialect.default_base_url).rstrip("/")
    return Endpoint(
        dialect=dialect,
        base_url=base,
        url=f"{base}/chat/completions",
        headers={
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
        credential=dialect.credential_class(api_key=api_key, base_url=base),
    )


# The most connections one provider's calls on one loop hold at once.
_CONNECTIONS = 256


@lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """One context to verify every provider with (loading the trusted certificates is
    costly): httpx's, with certifi's certificates (as the SDK verified them), not the
    system's, which a slim container may lack."""
    return httpx.create_ssl_context()


_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, aiohttp.ClientSession]]"
_CLIENTS = weakref.WeakKeyDictionary()
_CLIENTS_LOCK = threading.Lock()


def provider_client(base_url: str) -> aiohttp.ClientSession:
    """The running loop's client for ``base_url``: made on first use and kept alive from one
    call, and one run, to the next. Its connections belong to the loop, hence per loop."""
    loop = asyncio.get_running_loop()
    clients = _CLIENTS.get(loop)
    found = None if clients is None else clients.get(base_url)
    if found is None:
        with _CLIENTS_LOCK:
            clients = _CLIENTS.setdefault(loop, {})
            found = clients.get(base_url)
            if found is None:
                found = clients[base_url] = provider_session(limit=_CONNECTIONS, tls=_tls_context())
    return found


async def provider_clients_close() -> None:
    """Close the running loop's provider clients and their connections (the loop's owner
    stops)."""
    await _close(_CLIENTS.pop(asyncio.get_running_loop(), {}))


async def _close(clients: dict[str, aiohttp.ClientSession]) -> None:
    for client in clients.values():
        await client.close()


@atexit.register
def _close_idle_loops_clients() -> None:
    """At exit, the clients of loops nobody runs now (a thread's bridge loop: a management
    command's, a test's) are closed on their loop; a worker's host closes its own."""
    for loop in list(_CLIENTS):
        if not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(_close(_CLIENTS.pop(loop, {})))


class OpenAICompatibleChatModel(ChatModelBase):
    """AgentScope's chat model for an OpenAI-compatible ``/chat/completions`` endpoint,
    always streaming. ``call_ended`` hears each streamed call's usage once, as it ends.
    ``thinking`` turns the provider's thinking switch on (off by default, as AgentScope's)."""

    class Parameters(BaseModel):
        """No parameters: each provider's defaults (AgentScope's)."""

    def __init__(
        self,
        *,
        endpoint: Endpoint,
        model: str,
        max_retries: int,
        retry_delay: float,
        timeout: float,
        thinking: bool = False,
    ) -> None:
        super().__init__(
            credential=endpoint.credential,
            model=model,
            parameters=_NO_PARAMETERS,
            stream=True,
            max_retries=max_retries,
            retry_delay=retry_delay,
            context_size=endpoint.dialect.context_size,
        )
        self.endpoint = endpoint
        self.dialect = endpoint.dialect
        self.formatter = endpoint.dialect.formatter
        self.timeout = timeout
        self.thinking = thinking

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return RETRYABLE_ERRORS

    @classmethod
    def _get_structured_output_fallback_exceptions(cls) -> tuple[type[Exception], ...]:
        return STRUCTURED_OUTPUT_FALLBACK_ERRORS

    def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
        return self.dialect.disable_thinking_kwargs

    def call_ended(self, usage: ChatUsage | None) -> None:
        """A streamed call ended (read through, broken or closed early) with this usage;
        ``usage.metadata`` is the provider's raw ``usage`` object."""

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> Any:
        """A ``ChunkStream`` once the provider answered 200 (AgentScope's models return the
        SDK's stream wrapped in a generator; this one is iterated directly)."""
        body = await self._request_body(model_name, messages, tools, tool_choice, kwargs)
        client = provider_client(self.endpoint.base_url)
        started = time.monotonic()
        try:
            response = await client.post(
                self.endpoint.url,
                data=json.dumps(body, ensure_ascii=False).encode(),
                headers=self.endpoint.headers,
                # Connecting (or waiting for a free connection), and each read.
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=self.timeout, sock_read=self.timeout
                ),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _transport_error(exc) from exc
        if response.status >= 400:
            raise await _status_error(response)
        return ChunkStream(self, response, started)

    async def _request_body(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        kwargs: dict[str, Any],
    ) -> dict[str, Any]:
        """The request as AgentScope's model of the provider makes it (extra body fields
        merged in, as the SDK does)."""
        body: dict[str, Any] = {
            "model": model_name,
            "messages": await self.formatter.format(messages),
            "stream": True,
        }
        extra_body = kwargs.pop("extra_body", None) or {}
        body.update(kwargs)
        body.update(extra_body)
        if self.thinking:
            self.dialect.thinking_on(body)
        else:
            self.dialect.thinking_off(body)
        tools, choice = self._format_tools(tools, tool_choice)
        if tools:
            body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
        body["stream_options"] = {"include_usage": True}
        return body

    def _format_tools(
        self, tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[dict[str, Any]] | None, str | dict[str, Any] | None]:
        if tool_choice and tools:
            self._validate_tool_choice(tool_choice, tools)
            if tool_choice.tools:
                allowed = set(tool_choice.tools)
                tools = [tool for tool in tools if tool["function"]["name"] in allowed]
        if tools and self.dialect.flatten_tool_schemas:
            tools = [_flattened(tool) for tool in tools]
        if not tool_choice:
            return tools, None
        mode = tool_choice.mode
        if mode not in _TOOL_CHOICE_MODES:
            return tools, {"type": "function", "function": {"name": mode}}
        if mode == "required":
            return tools, self.dialect.required_tool_choice
        return tools, mode


_NO_PARAMETERS = OpenAICompatibleChatModel.Parameters()


def _flattened(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    parameters = function.get("parameters") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(parameters, dict):
        return tool
    flat = _flatten_json_schema(parameters)
    return tool if flat is parameters else {**tool, "function": {**function, "parameters": flat}}


def _transport_error(exc: BaseException) -> ProviderConnectionError:
    """The error of a request that got no (whole) answer."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return ProviderTimeoutError()
    return ProviderConnectionError(str(exc) or "Connection error.")


async def _status_error(response: aiohttp.ClientResponse) -> ProviderStatusError:
    """The SDK's error for a 4xx/5xx answer (its ``_make_status_error``)."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport_error(exc) from exc
    finally:
        response.release()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw.decode(errors="replace")
    status = response.status
    data = body.get("error", body) if isinstance(body, dict) else body
    return status_error(status, f"Error code: {status} - {body}", body=data)


def status_error(status: int, message: str, *, body: Any = None) -> ProviderStatusError:
    """The error of a 4xx/5xx answer: the class the SDK names for its status."""
    kind = _STATUS_ERRORS.get(status)
    if kind is None:
        kind = InternalServerError if status >= 500 else ProviderStatusError
    return kind(message, status_code=status, body=body)


_STATUS_ERRORS: dict[int, type[ProviderStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


class ChunkStream:
    """One streamed call: its response and what its parsing keeps. Iterating it gives the
    ``ChatResponse`` deltas; it closes the response, and reports the call's usage to the
    model, once, when the stream ends, breaks, is closed or is cancelled."""

    def __init__(
        self, model: OpenAICompatibleChatModel, response: aiohttp.ClientResponse, started: float
    ):
        self._model = model
        self._response = response
        self._started = started
        self._usage: ChatUsage | None = None
        self._ended = False
        self._chunks = self._read()

    def __aiter__(self) -> AsyncIterator[ChatResponse]:
        return self._chunks

    async def aclose(self) -> None:
        await self._chunks.aclose()
        await self._end()

    async def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            if self._response.content.at_eof():
                self._response.release()  # read through: its connection serves the next call
            else:
                self._response.close()  # broken or left early: its connection goes too
        finally:
            self._model.call_ended(self._usage)

    async def _read(self) -> AsyncGenerator[ChatResponse, None]:
        parse = StreamParser(self._model.dialect, self._started)
        data: list[bytes] = []  # the data lines of the event being read
        pending = b""
        try:
            # Read to the body's end, past ``[DONE]``: a connection read through goes back
            # to the pool for the next call.
            async for received in self._response.content.iter_any():
                lines = (pending + received).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.startswith(b"data:"):
                        data.append(line[5:].strip())
                    elif data and not line.strip():  # a blank line ends an event
                        chunk = parse(_event_json(data))
                        data = []
                        if chunk is not None:
                            yield chunk
            if pending.startswith(b"data:"):
                data.append(pending[5:].strip())
            if data:  # the last event, without its blank line
                chunk = parse(_event_json(data))
                if chunk is not None:
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _transport_error(exc) from exc
        finally:
            self._usage = parse.usage
            await self._end()


_DONE = object()


def _event_json(data: list[bytes]) -> Any:
    """One event's JSON (or ``_DONE``); an error the provider streams is raised (as the SDK
    raises it)."""
    payload = data[0] if len(data) == 1 else b"\n".join(data)
    if payload == b"[DONE]":
        return _DONE
    try:
        event = json.loads(payload)
    except ValueError as exc:
        unparsed = f"could not parse a streamed chunk: {payload[:200]!r}"
        raise ProviderError(unparsed) from exc
    if isinstance(event, dict) and event.get("error") and not event.get("choices"):
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ProviderError(message or "An error occurred during streaming", body=error)
    return event


class StreamParser:
    """A call's chunks to AgentScope's deltas, as its OpenAI-compatible models'
    ``_parse_stream_response`` makes them: a delta per chunk that carries content or
    follows the usage, text, thinking and each tool call as blocks with ids stable for the
    call."""

    def __init__(self, dialect: Dialect, started: float) -> None:
        self.dialect = dialect
        self.started = started
        self.usage: ChatUsage | None = None
        self.done = False
        self.response_id = _generate_id()
        self.text_id = _generate_id()
        self.thinking_id = _generate_id()
        self.created_at = datetime.now().isoformat()
        self.tool_calls: dict[Any, tuple[str, str]] = {}  # index: (id, name)

    def __call__(self, chunk: Any) -> ChatResponse | None:
        if chunk is _DONE:
            self.done = True
        if self.done or not isinstance(chunk, dict):
            return None
        self.response_id = chunk.get("id") or self.response_id
        raw_usage = chunk.get("usage")
        if raw_usage:
            self.usage = self._usage(raw_usage)
        choices = chunk.get("choices")
        content: list[Any] = []
        if choices:
            delta = choices[0].get("delta") or {}
            self._thinking(delta, content)
            text = delta.get("content")
            if text:
                content.append(TextBlock(text=text, id=self.text_id, created_at=self.created_at))
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._tool_calls(tool_calls, content)
        if not content and self.usage is None:
            return None
        return ChatResponse(
            content=content,
            is_last=False,
            id=self.response_id,
            created_at=self.created_at,
            usage=self.usage,
        )

    def _thinking(self, delta: dict[str, Any], content: list[Any]) -> None:
        thinking = delta.get("reasoning_content")
        if not isinstance(thinking, str) and self.dialect.reasoning_fallback:
            thinking = delta.get("reasoning")
        if thinking and isinstance(thinking, str):
            content.append(
                ThinkingBlock(thinking=thinking, id=self.thinking_id, created_at=self.created_at)
            )

    def _tool_calls(self, tool_calls: list[dict[str, Any]], content: list[Any]) -> None:
        for call in tool_calls:
            function = call.get("function") or {}
            name = function.get("name")
            arguments = function.get("arguments") or ""
            index = call.get("index")
            if index not in self.tool_calls:
                self.tool_calls[index] = (call.get("id"), name or "unknown")  # type: ignore[assignment]
            stored_id, stored_name = self.tool_calls[index]
            block_id = call.get("id") or stored_id
            for block in content:
                if isinstance(block, ToolCallBlock) and block.id == block_id:
                    block.input += arguments
                    break
            else:
                content.append(
                    ToolCallBlock(
                        id=block_id,
                        name=name or stored_name,
                        input=arguments,
                        created_at=self.created_at,
                    )
                )

    def _usage(self, raw: dict[str, Any]) -> ChatUsage:
        return ChatUsage(
            input_tokens=raw.get("prompt_tokens") or 0,
            output_tokens=raw.get("completion_tokens") or 0,
            time=time.monotonic() - self.started,
            cache_input_tokens=self.dialect.cached_tokens(raw),
            metadata=raw,
        )
