"""``gemini/<model>`` on AgentScope's ``GeminiChatModel`` (runtime/sdk_models/)."""

from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime
from typing import Any

from agentscope.credential import GeminiCredential
from agentscope.formatter import GeminiChatFormatter
from agentscope.model import ChatResponse, ChatUsage, GeminiChatModel

from agent_runs.runtime.chat_models import ModelCall
from agent_runs.runtime.sdk_models.recorded import RecordedSDKModel, dumped


class GeminiModel(RecordedSDKModel, GeminiChatModel):
    """``gemini/<model>``, the Gemini API's ``streamGenerateContent``. The record's tokens are
    AgentScope's (the prompt with its tool-use prompt; the output with the thoughts); the
    raw ``usageMetadata`` keeps ``thoughtsTokenCount`` and ``cachedContentTokenCount``."""

    SDK_NAME = "gemini"
    SDK_PARAMETERS = GeminiChatModel.Parameters
    SDK_FORMATTER = GeminiChatFormatter
    SDK_CONTEXT_SIZE = 1048576

    def _credential(self, api_key: str, base_url: str) -> Any:
        return GeminiCredential(api_key=api_key)

    def _client_kwargs(self, timeout: float, base_url: str) -> dict[str, Any]:
        http_options: dict[str, Any] = {"timeout": int(timeout * 1000)}  # milliseconds
        if base_url:
            http_options["base_url"] = base_url
        return {"http_options": http_options}

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
            raw.update(dumped(item.usage_metadata))

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
