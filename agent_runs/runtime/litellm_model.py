"""``litellm/<model>``: any model LiteLLM reaches (Azure OpenAI, Bedrock, Mistral, OpenRouter,
vLLM, ...; docs/configuration.md, "Models"), as an AgentScope chat model over
``litellm.acompletion``, configured by LiteLLM's own environment variables
(``OPENROUTER_API_KEY``, ``AZURE_API_BASE``, ...).

LiteLLM speaks each provider's wire format and answers in OpenAI's: the request is the one
the OpenAI-compatible model makes (its formatter: text, images, tool results; the tools and
``tool_choice``; ``stream_options.include_usage``), and its chunks are parsed by that model's
parser, so the structured output and every event come out the same. The usage LiteLLM
passes on is the call's raw usage (``metadata``), with a cost the provider reports
(OpenRouter's ``usage.cost``) as its ``cost``, never LiteLLM's own estimate.

Importing LiteLLM takes seconds: this module is imported only when such a model is
configured (``chat_model_for``), never at a worker's start.
"""

import os
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import openai
from agentscope.credential import OpenAICredential
from agentscope.message import Msg
from agentscope.tool import ToolChoice

from agent_runs.runtime.chat_models import ProviderChatModel, UsageLog
from agent_runs.runtime.openai_compatible import DIALECTS, Endpoint, StreamParser
from agent_runs.runtime.sdk_models import provider_error

# Without this LiteLLM fetches its price list from the network when imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # after the variable above, which LiteLLM reads at import

# LiteLLM's errors (its classes derive from the openai SDK's) and its transport's: raised as
# the lean path's (runtime/sdk_models.py), so retried and reported alike.
_LITELLM_ERRORS: tuple[type[Exception], ...] = (openai.APIError, httpx.HTTPError)

# The OpenAI-compatible model's request and parsing; LiteLLM holds the credentials.
_ENDPOINT = Endpoint(
    dialect=DIALECTS["openai"],
    base_url="",
    url="",
    headers={},
    credential=OpenAICredential(api_key="litellm"),
)


class LiteLLMChatModel(ProviderChatModel):
    """A LiteLLM model string's chat model, recorded like a provider's."""

    def __init__(
        self,
        *,
        model_id: str,
        usage_log: UsageLog,
        model: str,
        max_retries: int,
        retry_delay: float,
        timeout: float,
        thinking: bool = False,
    ) -> None:
        super().__init__(
            model_id=model_id,
            usage_log=usage_log,
            endpoint=_ENDPOINT,
            model=model,
            max_retries=max_retries,
            retry_delay=retry_delay,
            timeout=timeout,
            thinking=thinking,
        )

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> Any:
        if self.usage_log.before_call is not None:
            await self.usage_log.before_call()
        body = await self._request_body(model_name, messages, tools, tool_choice, kwargs)
        started = time.monotonic()
        try:
            # LiteLLM's retries are off: AgentScope's are the only ones (AGENT_MODEL_MAX_RETRIES).
            stream = await litellm.acompletion(**body, timeout=self.timeout, num_retries=0)
        except _LITELLM_ERRORS as exc:
            raise provider_error(exc) from exc
        return LiteLLMStream(self, stream, started)


class LiteLLMStream:
    """One streamed call: LiteLLM's chunks as AgentScope's deltas; the call's usage is
    reported to the model, once, when the stream ends, breaks, is closed or is cancelled."""

    def __init__(self, model: LiteLLMChatModel, stream: Any, started: float) -> None:
        self._model = model
        self._stream = stream
        self._started = started
        self._chunks = self._read()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks

    async def aclose(self) -> None:
        await self._chunks.aclose()

    async def _read(self) -> AsyncGenerator[Any, None]:
        parse = StreamParser(self._model.dialect, self._started)
        try:
            async for chunk in self._stream:
                delta = parse(_chunk_json(chunk))
                if delta is not None:
                    yield delta
        except _LITELLM_ERRORS as exc:  # the stream broke off
            raise provider_error(exc) from exc
        finally:
            try:
                await self._stream.aclose()  # its connection with it
            finally:
                self._model.call_ended(parse.usage)


def _chunk_json(chunk: Any) -> dict[str, Any]:
    """A LiteLLM chunk as the OpenAI chunk it stands for. LiteLLM writes its own bill (from
    its price list) into the last chunk's ``usage.cost`` and keeps the provider's own cost,
    if it sent one, as ``upstream_usage_cost``: the usage keeps the provider's as ``cost``
    (spec 5.2: a direct cost is the provider's) and LiteLLM's apart, as ``litellm_cost``."""
    data: dict[str, Any] = chunk.model_dump(exclude_none=True)
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        raw: dict[str, Any] = usage.model_dump(exclude_none=True)
        hidden = getattr(chunk, "_hidden_params", None) or {}
        if _UPSTREAM_COST in hidden:  # usage.cost is LiteLLM's bill
            bill = raw.pop("cost", None)
            if bill is not None:
                raw["litellm_cost"] = bill
            if hidden[_UPSTREAM_COST] is not None:
                raw["cost"] = hidden[_UPSTREAM_COST]
        data["usage"] = raw
    return data


# Where LiteLLM keeps the cost the provider reported once it put its own in usage.cost.
_UPSTREAM_COST = "upstream_usage_cost"
