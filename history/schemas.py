"""Protocol shapes of the history API (the compiled UI schema's are agent_runs/ui_schema.py).

docs/spec/run-agent-input.md: History API, HistoryMessage, UiSchemaRenderer, Example.
docs/spec/chat-messages-and-attachments.md: User Message Attachments (``metadata`` passthrough).
"""

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_runs.run_input import parse_uuid
from agent_runs.ui_schema import UiSchemaRenderer, exclude_none
from history.errors import HistoryQueryInvalid


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class HistoryAttachment(_Wire):
    mime_type: str = Field(alias="mimeType")
    url: str


class HistoryMessageUser(_Wire):
    """docs/spec/run-agent-input.md, HistoryMessageUser; ``metadata`` carries the stored
    ``user_message_attachments`` (docs/spec/chat-messages-and-attachments.md) when there are any."""

    id: str
    seq: int
    role: Literal["user"] = "user"
    content: str
    attachments: list[HistoryAttachment]
    metadata: dict[str, Any] | None = Field(default=None, exclude_if=exclude_none)
    timestamp: str


class HistoryMessageAssistant(_Wire):
    """docs/spec/run-agent-input.md, HistoryMessageAssistant."""

    id: str
    seq: int
    role: Literal["assistant"] = "assistant"
    content: str
    ui_schema: UiSchemaRenderer | None
    timestamp: str


class HistoryMessageReasoning(_Wire):
    """A model's reasoning before an answer (its ``reasoning_content``), shown only with
    ``?include=reasoning``: AG-UI 1.0's ``ReasoningMessage`` (``role: "reasoning"``), with the
    stage that reasoned."""

    id: str
    seq: int
    role: Literal["reasoning"] = "reasoning"
    content: str
    stage: str | None
    timestamp: str


HistoryMessage = Annotated[
    HistoryMessageUser | HistoryMessageAssistant | HistoryMessageReasoning,
    Field(discriminator="role"),
]


class HistorySnapshotResponse(_Wire):
    """docs/spec/run-agent-input.md, History API: one day of one thread."""

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
    include_reasoning: bool = False


# What ``include`` may add to the day's user and assistant messages.
HISTORY_INCLUDES = ("reasoning",)
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_history_query(params: Mapping[str, str]) -> HistoryQuery:
    """``threadId`` (a UUID), ``before`` (``YYYY-MM-DD``) and ``include`` (``reasoning``),
    all optional; a present but malformed one is :class:`HistoryQueryInvalid`."""
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
    include = params.get("include")
    if include is not None and include not in HISTORY_INCLUDES:
        raise HistoryQueryInvalid('include must be "reasoning"')
    return HistoryQuery(
        thread_id=thread_id, before=before, include_reasoning=include == "reasoning"
    )


def _parse_date(value: str) -> date | None:
    if not _ISO_DATE.fullmatch(value):  # fromisoformat alone also takes "20260315" and weeks
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:  # 2026-02-30
        return None
