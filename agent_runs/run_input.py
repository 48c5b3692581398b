"""The core's one canonical command: a run's input as AG-UI's ``RunAgentInput`` model.

docs/spec/run-agent-input.md, RunAgentInput Schema. Each protocol's edge builds one (the AG-UI edge
by the spec's validation rules, agent_runs/protocols/agui/inbound.py); the core stores its
snapshot and reads what it needs from the model, never from a protocol's wire JSON.
"""

import hashlib
import json
import uuid
from functools import cache
from typing import Any, Literal
from zoneinfo import available_timezones

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent_runs.errors import MultitaskInvalid

# How a client names the automation job of an ``automation`` run (docs/spec/run-agent-input.md,
# runtime_mode): a context item ``{"description": "automation_job", "value": "<job name>"}``.
AUTOMATION_JOB_CONTEXT = "automation_job"


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class TextContentBlock(_Camel):
    type: Literal["text"]
    text: str


class BinaryContentBlock(_Camel):
    type: Literal["binary"]
    mime_type: str
    id: str | None = None
    url: str
    filename: str | None = None


class ToolCallFunction(_Camel):
    name: str
    arguments: str


class ToolCall(_Camel):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction
    encrypted_value: str | None = None


class InputMessage(_Camel):
    """One AG-UI message of any role; role-specific fields are optional."""

    id: str = Field(min_length=1, max_length=128)
    role: Literal["user", "assistant", "system", "tool", "developer", "reasoning", "activity"]
    content: str | list[TextContentBlock | BinaryContentBlock] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    error: str | None = None
    encrypted_value: str | None = None


class Tool(_Camel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str
    parameters: dict[str, Any] = {}


class ResumeEntry(_Camel):
    """An answer to one of the thread's open interrupts (AG-UI 1.0's ``ResumeEntry``)."""

    interrupt_id: str = Field(min_length=1, max_length=40)
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    metadata: dict[str, Any] | None = None


class Context(_Camel):
    description: str
    value: str


class ClientTime(BaseModel):
    model_config = ConfigDict(frozen=True)

    device_timezone: str
    client_now_iso: str
    client_epoch_ms: int


class ForwardedProps(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    runtime_mode: Literal["chat", "automation"]
    client_time: ClientTime | None = None


class RunAgentInput(_Camel):
    thread_id: uuid.UUID
    run_id: str
    parent_run_id: str | None = None
    state: Any = None
    messages: list[InputMessage]
    tools: list[Tool] = []
    context: list[Context] = []
    forwarded_props: ForwardedProps
    # Answers to the thread's open interrupts: the run goes on with the reply they held.
    resume: list[ResumeEntry] = []

    @property
    def user_message(self) -> InputMessage:
        return self.messages[0]

    @property
    def tool_answers(self) -> list[InputMessage]:
        """The results of the client's tool calls the turn carries (its tool messages)."""
        return [message for message in self.messages if message.role == "tool"]

    @property
    def continues_reply(self) -> bool:
        """Whether the run answers the thread's open interrupts rather than a new user
        message: it carries resume entries or tool results and no user message."""
        has_user = any(message.role == "user" for message in self.messages)
        return not has_user and bool(self.resume or self.tool_answers)

    def snapshot(self) -> dict[str, Any]:
        """The canonical camelCase form, stored with the run and hashed for idempotency."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not data["resume"]:
            del data["resume"]  # a run's input as it was before runs could resume
        return data

    @property
    def automation_job(self) -> str:
        """The automation job the run names in its context ("" for none)."""
        for item in self.context:
            if item.description == AUTOMATION_JOB_CONTEXT:
                return item.value
        return ""


def snapshot_sha256(snapshot: dict[str, Any]) -> str:
    """A digest of a RunAgentInput snapshot that is the same for the same request, whichever
    key spelling or key order the client used."""
    canonical = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def user_text(content: str | list[Any] | None) -> str:
    """The text a user message carries: the string, or its text blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        block["text"] if isinstance(block, dict) else block.text
        for block in content
        if _block_type(block) == "text" and isinstance(_block_get(block, "text"), str)
    )


def _block_type(block: Any) -> Any:
    return _block_get(block, "type")


def _block_get(block: Any, key: str) -> Any:
    return block.get(key) if isinstance(block, dict) else getattr(block, key, None)


def parse_uuid(value: str) -> uuid.UUID | None:
    """The UUID ``value`` spells, or ``None``."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


@cache
def iana_timezones() -> frozenset[str]:
    return frozenset(available_timezones())


# The values of ``agent_runs.models.MultitaskStrategy`` (this module imports no model).
MULTITASK_STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")


def multitask_parse(value: Any, *, field: str, status: int = 400) -> str | None:
    """A request's multitask strategy (docs/protocols/multitask.md): ``None`` when it names
    none (absent, ``null`` or empty), else one of ``MULTITASK_STRATEGIES`` (any case).
    Anything else is ``MultitaskInvalid`` naming ``field`` and the allowed values."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value.strip().lower() not in MULTITASK_STRATEGIES:
        raise MultitaskInvalid(field, status=status)
    return value.strip().lower()
