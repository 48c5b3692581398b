"""``ollama/<model>`` on AgentScope's ``OllamaChatModel`` (runtime/sdk_models/)."""

from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime
from typing import Any

from agentscope.credential import OllamaCredential
from agentscope.formatter import OllamaChatFormatter
from agentscope.model import ChatResponse, ChatUsage, OllamaChatModel

from agent_runs.runtime.chat_models import ModelCall
from agent_runs.runtime.sdk_models.recorded import RecordedSDKModel

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

    SDK_NAME = "ollama"
    SDK_PARAMETERS = OllamaChatModel.Parameters
    SDK_FORMATTER = OllamaChatFormatter
    SDK_CONTEXT_SIZE = 32768

    def _credential(self, api_key: str, base_url: str) -> Any:
        return OllamaCredential(**({"host": base_url} if base_url else {}))

    def _make_client(self) -> tuple[Any, Callable[[], Awaitable[Any]]]:
        import ollama

        client = ollama.AsyncClient(host=self.client_key[2] or None, **self.client_kwargs)
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
