"""The UI-schema compiler: a run's structured agent output to a ``UiSchemaRenderer``.

docs/spec/run-agent-input.md, UiSchemaRenderer. Pure: no ORM, no I/O. The agent output is what the
worker stores as the assistant message's ``metadata["agent_output"]``::

    {"answer", "key_points", "result_type", "status": "success|partial_success|failed",
     "suggested_actions": [{"label", "prompt"} | "prompt"],
     "ui_hints": {"appearance": "card|plain", "title": str, "blocks": [...]} | null}

A model writes ``ui_hints``, so anything in them may be wrong: an unknown or malformed block
is dropped, an over-long text or list is cut, and the compiler never raises.
"""

import logging
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# Caps of the compiled UI schema: what an agent asks for beyond them is cut, never an error.
MAX_BLOCKS = 50
MAX_ITEMS = 50
MAX_ACTIONS = 10
MAX_TEXT_CHARS = 4000
MAX_LABEL_CHARS = 200
MAX_URL_CHARS = 2048

UiStatus = Literal["info", "success", "warning", "error", "pending"]


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextNode(_Node):
    type: Literal["text"] = "text"
    content: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    role: Literal["title", "body", "caption"] = "body"


class BadgeNode(_Node):
    type: Literal["badge"] = "badge"
    label: str = Field(min_length=1, max_length=MAX_LABEL_CHARS)
    status: UiStatus = "info"


class ListNode(_Node):
    type: Literal["list"] = "list"
    items: list[Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]] = Field(
        min_length=1, max_length=MAX_ITEMS
    )


class KeyValueItem(_Node):
    key: str = Field(min_length=1, max_length=MAX_LABEL_CHARS)
    value: str = Field(max_length=MAX_TEXT_CHARS)


class KeyValueNode(_Node):
    type: Literal["key_value"] = "key_value"
    items: list[KeyValueItem] = Field(min_length=1, max_length=MAX_ITEMS)


class ImageNode(_Node):
    type: Literal["image"] = "image"
    url: str = Field(max_length=MAX_URL_CHARS)
    alt: str = Field(default="", max_length=MAX_LABEL_CHARS)

    @field_validator("url")
    @classmethod
    def _http_only(cls, url: str) -> str:
        # A client renders this as <img src>: no javascript:, data: or relative URLs.
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("image url must be an absolute http(s) URL")
        return url


class DividerNode(_Node):
    type: Literal["divider"] = "divider"


class SendMessageAction(_Node):
    """A suggested action: tapping it sends ``prompt`` as the user's next message."""

    type: Literal["send_message"] = "send_message"
    prompt: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)


class ActionNode(_Node):
    type: Literal["action"] = "action"
    label: str = Field(min_length=1, max_length=MAX_LABEL_CHARS)
    action: SendMessageAction


class StackNode(_Node):
    type: Literal["stack"] = "stack"
    appearance: Literal["card", "plain"] = "card"
    children: list["UiNode"] = Field(default_factory=list)


UiNode = Annotated[
    TextNode
    | BadgeNode
    | ListNode
    | KeyValueNode
    | ImageNode
    | DividerNode
    | ActionNode
    | StackNode,
    Field(discriminator="type"),
]
StackNode.model_rebuild()


def exclude_none(value: Any) -> bool:
    return value is None


class UiSchemaMeta(_Node):
    request_id: str | None = Field(default=None, alias="requestId", exclude_if=exclude_none)
    tool_id: str | None = Field(default=None, alias="toolId", exclude_if=exclude_none)
    trace_id: str | None = Field(default=None, alias="traceId", exclude_if=exclude_none)
    user_id: str | None = Field(default=None, alias="userId", exclude_if=exclude_none)


class UiSchemaRenderer(_Node):
    """docs/spec/run-agent-input.md, UiSchemaRenderer."""

    version: Literal["2.0"] = "2.0"
    locale: str
    status: UiStatus
    theme: Literal["default", "light", "dark"] = "default"
    meta: UiSchemaMeta | None = Field(default=None, exclude_if=exclude_none)
    root: StackNode

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


logger = logging.getLogger(__name__)

# agent_output.status -> UiSchemaRenderer.status (and the status badge's).
_STATUS: dict[str, UiStatus] = {
    "success": "success",
    "partial_success": "warning",
    "failed": "error",
}
_TEXT_ROLES = ("title", "body", "caption")
_BADGE_STATUSES = ("info", "success", "warning", "error", "pending")
_APPEARANCES = ("card", "plain")
_LOCALE = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")


def ui_schema_compile(
    agent_output: Mapping[str, Any] | None, *, locale: str = "en"
) -> dict[str, Any] | None:
    """The wire form of :func:`ui_schema_build`: the ``ui_schema`` of ``TEXT_MESSAGE_END`` and
    of a history assistant message, or ``None`` when the output has no ``ui_hints``."""
    schema = ui_schema_build(agent_output, locale=locale)
    return schema.to_wire() if schema is not None else None


def ui_schema_build(
    agent_output: Mapping[str, Any] | None, *, locale: str = "en"
) -> UiSchemaRenderer | None:
    """Compile ``agent_output`` to a ``UiSchemaRenderer``: a root ``stack`` with the hints'
    appearance holding the title, a status badge, the valid blocks and one ``action`` per
    suggested action. ``None`` when there are no ``ui_hints`` (or nothing in them to show)."""
    try:
        return _build(agent_output, locale)
    except Exception:  # a bad hint must never fail a run or a history call
        logger.warning("ui_hints dropped: they could not be compiled", exc_info=True)
        return None


def _build(agent_output: Any, locale: Any) -> UiSchemaRenderer | None:
    if not isinstance(agent_output, Mapping):
        return None
    hints = agent_output.get("ui_hints")
    if not isinstance(hints, Mapping):
        return None
    run_status = agent_output.get("status")
    status = _STATUS.get(run_status, "info") if isinstance(run_status, str) else "info"
    children: list[UiNode] = []
    title = _clip(hints.get("title"), MAX_LABEL_CHARS)
    if title:
        children.append(TextNode(content=title, role="title"))
    if isinstance(run_status, str) and run_status in _STATUS:
        children.append(BadgeNode(label=run_status.upper(), status=status))
    blocks = hints.get("blocks")
    if isinstance(blocks, list):
        children.extend(node for node in map(_block_node, blocks[:MAX_BLOCKS]) if node)
    children.extend(_action_nodes(agent_output.get("suggested_actions")))
    if not children:
        return None
    appearance = hints.get("appearance")
    return UiSchemaRenderer(
        locale=_locale(locale),
        status=status,
        root=StackNode(
            appearance=appearance if appearance in _APPEARANCES else "card", children=children
        ),
    )


def _block_node(block: Any) -> UiNode | None:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        return None
    builder = _BUILDERS.get(block["type"])
    if builder is None:
        return None
    try:
        return builder(block)
    except ValidationError:
        return None


def _text_node(block: Mapping[str, Any]) -> UiNode | None:
    content = _clip(block.get("content"), MAX_TEXT_CHARS)
    role = block.get("role")
    if not content:
        return None
    return TextNode(content=content, role=role if role in _TEXT_ROLES else "body")


def _badge_node(block: Mapping[str, Any]) -> UiNode | None:
    label = _clip(block.get("label"), MAX_LABEL_CHARS)
    status = block.get("status")
    if not label:
        return None
    return BadgeNode(label=label, status=status if status in _BADGE_STATUSES else "info")


def _list_node(block: Mapping[str, Any]) -> UiNode | None:
    items = block.get("items")
    if not isinstance(items, list):
        return None
    texts = [text for text in (_clip(item, MAX_TEXT_CHARS) for item in items[:MAX_ITEMS]) if text]
    return ListNode(items=texts) if texts else None


def _key_value_node(block: Mapping[str, Any]) -> UiNode | None:
    items = block.get("items")
    if not isinstance(items, list):
        return None
    pairs = []
    for item in items[:MAX_ITEMS]:
        if not isinstance(item, Mapping):
            continue
        key = _clip(item.get("key"), MAX_LABEL_CHARS)
        value = _scalar_text(item.get("value"))
        if key and value is not None:
            pairs.append(KeyValueItem(key=key, value=value))
    return KeyValueNode(items=pairs) if pairs else None


def _image_node(block: Mapping[str, Any]) -> UiNode | None:
    url = block.get("url")
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:  # a cut URL is a wrong URL
        return None
    url = url.strip()
    # The model writes the hints, and a client loads an image's URL as it renders it: only
    # places the operator trusts (by default this service's signed URLs), never a URL that
    # could carry the conversation to someone else's server.
    if not url.startswith(tuple(settings.UI_SCHEMA_IMAGE_URL_PREFIXES)):
        return None
    return ImageNode(url=url, alt=_clip(block.get("alt"), MAX_LABEL_CHARS) or "")


def _divider_node(block: Mapping[str, Any]) -> UiNode | None:
    return DividerNode()


_BUILDERS: dict[str, Callable[[Mapping[str, Any]], UiNode | None]] = {
    "text": _text_node,
    "badge": _badge_node,
    "list": _list_node,
    "key_value": _key_value_node,
    "image": _image_node,
    "divider": _divider_node,
}


def _action_nodes(actions: Any) -> list[UiNode]:
    """One ``action`` node per suggested action: ``{"label", "prompt"}`` or a plain prompt."""
    if not isinstance(actions, list):
        return []
    nodes: list[UiNode] = []
    for action in actions[:MAX_ACTIONS]:
        if isinstance(action, Mapping):
            label = _clip(action.get("label"), MAX_LABEL_CHARS)
            prompt = _clip(action.get("prompt"), MAX_TEXT_CHARS)
        else:
            label = _clip(action, MAX_LABEL_CHARS)
            prompt = _clip(action, MAX_TEXT_CHARS)
        label, prompt = label or (prompt or "")[:MAX_LABEL_CHARS], prompt or label
        if label and prompt:
            nodes.append(ActionNode(label=label, action=SendMessageAction(prompt=prompt)))
    return nodes


def _clip(value: Any, limit: int) -> str | None:
    """A non-blank string, stripped and cut to ``limit`` characters; anything else ``None``."""
    if not isinstance(value, str):
        return None
    return value.strip()[:limit] or None


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip()[:MAX_TEXT_CHARS]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return str(value)[:MAX_TEXT_CHARS]
        except ValueError:  # an int beyond Python's digit limit for str()
            return None
    return None


def _locale(locale: Any) -> str:
    if isinstance(locale, str) and len(locale) <= 35 and _LOCALE.fullmatch(locale):
        return locale
    return "en"
