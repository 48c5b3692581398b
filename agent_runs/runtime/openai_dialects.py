"""The OpenAI-compatible providers the lean model speaks to (runtime/openai_compatible.py):
what each one's AgentScope model does differently on the same wire format (its ``Dialect``),
and a provider configuration's ``Endpoint``, made once and shared by every call.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

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
