"""The offline ``demo`` model: an AgentScope chat model that answers without a network.

It is not a provider and never pretends to be one: every answer says it comes from the demo
model. It exists so a fresh machine can run the whole pipeline with no API key.
"""

import asyncio
import json
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
_REMEMBER = re.compile(r"\bremember that (.+?)(?:[.!]|$)", re.IGNORECASE)
# AgentScope's structured-output tools: the agent's and generate_structured_output's.
_STRUCTURED_TOOLS = ("GenerateStructuredOutput", "generate_structured_output")


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
        offered = {tool["function"]["name"]: tool["function"] for tool in tools or []}
        call = _requested_tool_call(prompt, set(offered))
        if call is not None:
            return self._tool_call(*call, prompt_tokens=prompt_tokens)
        said = _said(prompt)
        after_tool = bool(said) and said[-1].get("role") == "tool"
        if after_tool and _DECLINED in str(said[-1].get("content")):
            answer = "(demo model) You declined the tool call, so nothing was done."
        elif after_tool:
            answer = f"(demo model) The tool answered: {_text(said[-1].get('content'))}"
        else:
            answer = demo_answer(_last_user_text(prompt))
        for name in _STRUCTURED_TOOLS:
            if name in offered:
                properties = offered[name].get("parameters", {}).get("properties", {})
                arguments = _structured_arguments(properties, prompt, answer, after_tool)
                return self._tool_call(name, arguments, prompt_tokens=prompt_tokens)
        return self._stream(answer, prompt_tokens=prompt_tokens)

    async def _tool_call(
        self, name: str, arguments: str, *, prompt_tokens: int
    ) -> AsyncGenerator[ChatResponse, None]:
        call_id = f"demo-{uuid.uuid4().hex[:12]}"
        # The arguments arrive in pieces, as a provider streams them.
        for start in range(0, len(arguments), 24):
            piece = ToolCallBlock(id=call_id, name=name, input=arguments[start : start + 24])
            yield ChatResponse(content=[piece], is_last=False)
            await asyncio.sleep(0)
        block = ToolCallBlock(id=call_id, name=name, input=arguments)
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
    that tool once (before any tool result), so tool events can be seen without a provider;
    offered ``memory_remember``, it keeps what follows "remember that" in the turn."""
    said = _said(prompt)
    if not said or said[-1].get("role") != "user":
        return None
    text = _text(said[-1].get("content")).strip()
    remember = _REMEMBER.search(text)
    if "memory_remember" in tool_names and remember:
        return "memory_remember", json.dumps({"content": remember.group(1).strip()})
    match = _TOOL_REQUEST.match(text)
    if match is None or match.group(1) not in tool_names:
        return None
    return match.group(1), match.group(2) or "{}"


def _structured_arguments(
    properties: dict[str, Any], prompt: list[dict[str, Any]], answer: str, after_tool: bool
) -> str:
    """The demo's structured output: a route for the router's schema, else the worker's
    ``AgentOutput``."""
    if "route" in properties:
        # A named tool for "/tool <name>", otherwise every enabled tool.
        match = re.match(r"/tool\s+(\w+)", _last_user_text(prompt).strip())
        return json.dumps({"route": "use_tools", "tools": [match.group(1)] if match else []})
    output = {
        "answer": answer,
        "key_points": ["the offline demo model answered"],
        "result_type": "execution_report" if after_tool else "unknown",
        "suggested_actions": [],
        "status": "success",
        "ui_hints": {
            "appearance": "card",
            "title": "Demo answer",
            "blocks": [{"type": "text", "content": answer, "role": "body"}],
        },
    }
    return json.dumps(output, ensure_ascii=False)


def _said(prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompt's messages that say something (not only AgentScope's reminders; a tool's
    result always does, were it only AgentScope's note that the user declined the call)."""
    return [
        item
        for item in prompt
        if _text(item.get("content")) or item.get("tool_calls") or item.get("role") == "tool"
    ]


# How AgentScope tells the model that a person declined a tool call.
_DECLINED = "is denied by user"


def _text(content: Any) -> str:
    """The text of a message, without the reminders AgentScope adds for the model."""
    parts = content if isinstance(content, list) else [{"text": content or ""}]
    texts = [str(part.get("text", "")) for part in parts if isinstance(part, dict)]
    return " ".join(text for text in texts if text and not text.startswith("<system-reminder>"))


def _last_user_text(prompt: list[dict[str, Any]]) -> str:
    for item in reversed(prompt):
        text = _text(item.get("content"))
        if item.get("role") == "user" and text:
            return text
    return ""
