"""The OpenAI-compatible stream parser: each SSE event's JSON (``event_json``) to the
``ChatResponse`` delta AgentScope's OpenAI-compatible models' ``_parse_stream_response``
yields (``StreamParser``), shared by the lean model (runtime/openai_compatible.py) and
LiteLLM's (runtime/litellm_model.py). It runs on every chunk of every call: plain dicts,
one ``json.loads`` per event, no object but the delta's blocks.
"""

import json
import time
from datetime import datetime
from typing import Any

from agentscope._utils._common import _generate_id
from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage

from agent_runs.runtime.openai_dialects import Dialect
from agent_runs.runtime.provider_errors import ProviderError

_DONE = object()


def event_json(data: list[bytes]) -> Any:
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
