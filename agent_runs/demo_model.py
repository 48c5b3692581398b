"""The offline ``demo`` model: an AgentScope chat model that answers without a network.

It is not a provider and never pretends to be one: every answer says it comes from the demo
model. It exists so a fresh machine can run the whole pipeline with no API key.
"""

import asyncio
import re
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from pydantic import BaseModel

DEMO_MODEL_ID = "demo"
_TOOL_REQUEST = re.compile(r"^/tool\s+(\w+)\s*(\{.*\})?$", re.DOTALL)


class DemoCredential(CredentialBase):
    """The demo model needs no key; AgentScope still wants a credential object."""


class DemoChatModel(ChatModelBase):
    class Parameters(BaseModel):
        pass

    def __init__(self) -> None:
        super().__init__(
            credential=DemoCredential(name=DEMO_MODEL_ID),
            model=DEMO_MODEL_ID,
            parameters=self.Parameters(),
            stream=True,
            max_retries=0,
        )
        # The real OpenAI formatter runs, so the demo sees the prompt a provider would.
        self.formatter = OpenAIChatFormatter()

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> AsyncGenerator[ChatResponse, None]:
        prompt = await self.formatter.format(messages)
        prompt_tokens = max(1, sum(len(str(item.get("content", ""))) for item in prompt) // 4)
        tool_names = {tool["function"]["name"] for tool in tools or []}
        call = _requested_tool_call(prompt, tool_names)
        if call is not None:
            return self._tool_call(*call, prompt_tokens=prompt_tokens)
        if prompt and prompt[-1].get("role") == "tool":
            answer = f"(demo model) The tool answered: {_text(prompt[-1].get('content'))}"
        else:
            answer = demo_answer(_last_user_text(prompt))
        return self._stream(answer, prompt_tokens=prompt_tokens)

    async def _tool_call(
        self, name: str, arguments: str, *, prompt_tokens: int
    ) -> AsyncGenerator[ChatResponse, None]:
        block = ToolCallBlock(id=f"demo-{uuid.uuid4().hex[:12]}", name=name, input=arguments)
        yield ChatResponse(content=[block], is_last=False)
        usage = ChatUsage(input_tokens=prompt_tokens, output_tokens=1, time=0.0)
        # The last chunk holds the whole response, as AgentScope expects.
        yield ChatResponse(content=[block], is_last=True, usage=usage)

    async def _stream(
        self, answer: str, *, prompt_tokens: int
    ) -> AsyncGenerator[ChatResponse, None]:
        words = answer.split(" ")
        for index, word in enumerate(words):
            delta = word if index == 0 else " " + word
            yield ChatResponse(content=[TextBlock(text=delta)], is_last=False)
            await asyncio.sleep(0)
        usage = ChatUsage(input_tokens=prompt_tokens, output_tokens=len(words), time=0.0)
        yield ChatResponse(content=[TextBlock(text=answer)], is_last=True, usage=usage)


def demo_answer(user_text: str) -> str:
    """The demo's deterministic answer to a user's text."""
    text = " ".join(user_text.split())
    if len(text) > 200:
        text = text[:200] + "…"
    return (
        f'(demo model) You said: "{text}". This answer comes from the offline demo model; '
        "configure a provider to get real answers."
    )


def _requested_tool_call(
    prompt: list[dict[str, Any]], tool_names: set[str]
) -> tuple[str, str] | None:
    """``/tool <name> [json arguments]`` as the user's latest message asks the demo to call
    that tool once (before any tool result), so tool events can be seen without a provider."""
    if not prompt or prompt[-1].get("role") != "user":
        return None
    match = _TOOL_REQUEST.match(_text(prompt[-1].get("content")).strip())
    if match is None or match.group(1) not in tool_names:
        return None
    return match.group(1), match.group(2) or "{}"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _last_user_text(prompt: list[dict[str, Any]]) -> str:
    for item in reversed(prompt):
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
