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

from agent_runs.runtime.chat_models import ProviderChatModel
from agent_runs.runtime.openai_dialects import DIALECTS, Endpoint
from agent_runs.runtime.openai_stream import StreamParser
from agent_runs.runtime.provider_errors import provider_error

# Without this LiteLLM fetches its price list from the network when imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # after the variable above, which LiteLLM reads at import

# LiteLLM's errors (its classes derive from the openai SDK's) and its transport's: raised as
# the lean path's (runtime/provider_errors.py), so retried and reported alike.
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
    """A LiteLLM model string's chat model, recorded like a provider's: the OpenAI-compatible
    model's request, sent through ``litellm.acompletion``."""

    def __init__(self, **arguments: Any) -> None:
        """``ProviderChatModel``'s arguments but the endpoint (LiteLLM holds the credentials)."""
        super().__init__(endpoint=_ENDPOINT, **arguments)

    async def _send(self, body: dict[str, Any]) -> Any:
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
