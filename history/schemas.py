"""Protocol shapes of the history API and of the compiled UI schema.

spec/run-agent-input.md: History API, HistoryMessage, UiSchemaRenderer, Example.
spec/chat-messages-and-attachments.md: User Message Attachments (``metadata`` passthrough).
"""

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_runs.schemas import parse_uuid
from history.errors import HistoryQueryInvalid

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


def _exclude_none(value: Any) -> bool:
    return value is None


class UiSchemaMeta(_Node):
    request_id: str | None = Field(default=None, alias="requestId", exclude_if=_exclude_none)
    tool_id: str | None = Field(default=None, alias="toolId", exclude_if=_exclude_none)
    trace_id: str | None = Field(default=None, alias="traceId", exclude_if=_exclude_none)
    user_id: str | None = Field(default=None, alias="userId", exclude_if=_exclude_none)


class UiSchemaRenderer(_Node):
    """spec/run-agent-input.md, UiSchemaRenderer."""

    version: Literal["2.0"] = "2.0"
    locale: str
    status: UiStatus
    theme: Literal["default", "light", "dark"] = "default"
    meta: UiSchemaMeta | None = Field(default=None, exclude_if=_exclude_none)
    root: StackNode

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class HistoryAttachment(_Wire):
    mime_type: str = Field(alias="mimeType")
    url: str


class HistoryMessageUser(_Wire):
    """spec/run-agent-input.md, HistoryMessageUser; ``metadata`` carries the stored
    ``user_message_attachments`` (spec/chat-messages-and-attachments.md) when there are any."""

    id: str
    seq: int
    role: Literal["user"] = "user"
    content: str
    attachments: list[HistoryAttachment]
    metadata: dict[str, Any] | None = Field(default=None, exclude_if=_exclude_none)
    timestamp: str


class HistoryMessageAssistant(_Wire):
    """spec/run-agent-input.md, HistoryMessageAssistant."""

    id: str
    seq: int
    role: Literal["assistant"] = "assistant"
    content: str
    ui_schema: UiSchemaRenderer | None
    timestamp: str


HistoryMessage = Annotated[
    HistoryMessageUser | HistoryMessageAssistant, Field(discriminator="role")
]


class HistorySnapshotResponse(_Wire):
    """spec/run-agent-input.md, History API: one day of one thread."""

    scope: Literal["history_day"] = "history_day"
    thread_id: uuid.UUID | None = Field(alias="threadId")
    day: date | None
    has_more: bool = Field(alias="hasMore")
    messages: list[HistoryMessage]

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data

    def to_wire_json(self) -> str:
        """The same as ``to_wire``, as JSON text."""
        return self.model_dump_json(by_alias=True)


@dataclass(frozen=True)
class HistoryQuery:
    """The parsed query string of ``GET /api/v1/agent/history``."""

    thread_id: uuid.UUID | None
    before: date | None


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_history_query(params: Mapping[str, str]) -> HistoryQuery:
    """``threadId`` (a UUID) and ``before`` (``YYYY-MM-DD``), both optional; a present but
    malformed one is :class:`HistoryQueryInvalid`."""
    thread_id = None
    if "threadId" in params:
        thread_id = parse_uuid(params["threadId"])
        if thread_id is None:
            raise HistoryQueryInvalid("threadId must be a valid UUID")
    before = None
    if "before" in params:
        before = _parse_date(params["before"])
        if before is None:
            raise HistoryQueryInvalid("before must be a calendar date in YYYY-MM-DD format")
    return HistoryQuery(thread_id=thread_id, before=before)


def _parse_date(value: str) -> date | None:
    if not _ISO_DATE.fullmatch(value):  # fromisoformat alone also takes "20260315" and weeks
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:  # 2026-02-30
        return None
