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

Errors are the ``ProviderError`` classes (runtime/provider_errors.py), shaped as the SDK's (a
connection error, a timeout, a status error per status the SDK names); AgentScope retries a
connection error, a timeout, a 429 and a 5xx raised before any chunk, as it retries the SDK's.
So a worker
never needs the SDK (AgentScope's own import of it is deferred: runtime/lazy_imports.py).
Everything a call keeps while it streams is in its own ``ChunkStream`` (its chunks parsed by
runtime/openai_stream.py): calls on one loop share nothing mutable but the connection pool.
The providers' dialects and endpoints are in runtime/openai_dialects.py.
"""

import asyncio
import atexit
import json
import ssl
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from functools import lru_cache
from typing import Any

import aiohttp
import httpx
from agentscope._utils._common import _flatten_json_schema
from agentscope.message import Msg
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from agentscope.tool import ToolChoice
from pydantic import BaseModel

from agent_runs.runtime.openai_dialects import Endpoint
from agent_runs.runtime.openai_stream import StreamParser, event_json
from agent_runs.runtime.provider_errors import (
    ProviderError as ProviderError,  # where the runtime catches it (runtime/execution.py)
)
from agent_runs.runtime.provider_errors import (
    ProviderRetries,
    ProviderStatusError,
    status_error,
    transport_error,
)
from agent_runs.runtime.provider_transport import provider_session

_TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


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


class OpenAICompatibleChatModel(ProviderRetries, ChatModelBase):
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
        """The call's stream (``_send``'s): AgentScope's models return the SDK's stream
        wrapped in a generator; this one is iterated directly."""
        body = await self._request_body(model_name, messages, tools, tool_choice, kwargs)
        return await self._send(body)

    async def _send(self, body: dict[str, Any]) -> Any:
        """Send the request, streamed: its ``ChunkStream`` once the provider answered 200."""
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
            raise transport_error(exc) from exc
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


async def _status_error(response: aiohttp.ClientResponse) -> ProviderStatusError:
    """The SDK's error for a 4xx/5xx answer (its ``_make_status_error``)."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise transport_error(exc) from exc
    finally:
        response.release()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw.decode(errors="replace")
    status = response.status
    data = body.get("error", body) if isinstance(body, dict) else body
    return status_error(status, f"Error code: {status} - {body}", body=data)


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
                        chunk = parse(event_json(data))
                        data = []
                        if chunk is not None:
                            yield chunk
            if pending.startswith(b"data:"):
                data.append(pending[5:].strip())
            if data:  # the last event, without its blank line
                chunk = parse(event_json(data))
                if chunk is not None:
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise transport_error(exc) from exc
        finally:
            self._usage = parse.usage
            await self._end()
