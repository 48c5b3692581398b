"""``anthropic/<model>`` on AgentScope's ``AnthropicChatModel`` (runtime/sdk_models/)."""

from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime
from typing import Any

from agentscope.credential import AnthropicCredential
from agentscope.formatter import AnthropicChatFormatter
from agentscope.model import AnthropicChatModel, ChatResponse, ChatUsage

from agent_runs.runtime.chat_models import ModelCall
from agent_runs.runtime.sdk_models.recorded import RecordedSDKModel, dumped


class AnthropicModel(RecordedSDKModel, AnthropicChatModel):
    """``anthropic/<model>``. Anthropic's ``input_tokens`` leaves out the prompt's tokens read
    from and written to its cache: the record's ``input_tokens`` is the whole prompt, as the
    spec's (5.3), and ``cache_input_tokens`` / ``cache_creation_input_tokens`` its parts."""

    SDK_NAME = "anthropic"
    SDK_PARAMETERS = AnthropicChatModel.Parameters
    SDK_FORMATTER = AnthropicChatFormatter
    SDK_CONTEXT_SIZE = 200000

    def _credential(self, api_key: str, base_url: str) -> Any:
        return AnthropicCredential(api_key=api_key, base_url=base_url or None)

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
            raw.update(dumped(item.message.usage))
        elif item.type == "message_delta":
            raw.update(dumped(item.usage))  # the final output count (and any others)

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
