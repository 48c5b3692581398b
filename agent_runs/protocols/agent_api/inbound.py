"""What an Agent API request carries, checked before anything is stored or streamed: the JSON
body (``JsonBodyParser``), the spec's ``AgentRequest`` (docs/spec/agent-api-protocol.md,
5. Request Models) as pydantic models, and its new user message as the core's
``RunAgentInput``. Pure but for reading the request stream."""

import uuid
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from agent_runs.api import json_input
from agent_runs.protocols.agent_api.errors import BodyInvalid
from agent_runs.run_input import (
    BinaryContentBlock,
    ForwardedProps,
    InputMessage,
    ResumeEntry,
    RunAgentInput,
    TextContentBlock,
)

MAX_BODY_BYTES = 256 * 1024
MAX_TEXT_CHARS = 10_000
MAX_IMAGES = 3
MAX_CONTENT_PARTS = 20
MAX_SESSION_ID_CHARS = 200
# What the request asked beyond its input, kept with the run (``Run.request``) and given
# back on its response objects. The run's agent decides its model and sampling itself.
KEPT_FIELDS = (
    "model",
    "top_p",
    "temperature",
    "frequency_penalty",
    "presence_penalty",
    "max_tokens",
    "stop",
    "n",
    "seed",
    "tools",
)


class JsonBodyParser(json_input.JsonBodyParser):
    """At most 256 KB, and never empty."""

    max_bytes = MAX_BODY_BYTES
    empty_body = "the body must be a JSON object (an AgentRequest)"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Content(_Model):
    """A part of the message: ``{"type": "text", "text"}``, or ``{"type": "image",
    "image_url"}`` naming a signed URL of the caller's attachments (``POST
    /api/v1/agent/attachments``)."""

    type: Literal["text", "image"]
    text: StrictStr | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    image_url: StrictStr | None = Field(default=None, min_length=1, max_length=4096)


class Message(_Model):
    """The new user message (the session keeps the conversation before it)."""

    role: Literal["user"]
    type: Literal["message"] = "message"
    content: list[Content] = Field(min_length=1, max_length=MAX_CONTENT_PARTS)


class ApprovalAnswer(_Model):
    """An ``mcp_approval_response``'s data: the approval request it answers (the interrupt's
    id), the answer, and optionally a reason and the call's arguments edited."""

    approval_request_id: StrictStr = Field(min_length=1, max_length=40)
    approve: StrictBool
    reason: StrictStr | None = Field(default=None, max_length=2000)
    arguments: dict[str, Any] | None = None


class ApprovalContent(_Model):
    type: Literal["data"]
    data: ApprovalAnswer


class ApprovalResponse(_Model):
    """The answers to the session's open approval requests (the spec's
    ``MessageType.MCP_APPROVAL_RESPONSE``): a data content each."""

    role: Literal["user"] = "user"
    type: Literal["mcp_approval_response"]
    content: list[ApprovalContent] = Field(min_length=1, max_length=MAX_CONTENT_PARTS)


class AgentRequest(_Model):
    """docs/spec/agent-api-protocol.md, 5. Request Models: ``input`` holds the one new user
    message; the model and sampling fields are kept (``kept``), not applied: the run's agent
    decides them. Unknown fields (``user_id``, ``response_id``…) are ignored."""

    input: list[Message] = Field(min_length=1, max_length=1)
    stream: StrictBool = True
    model: StrictStr | None = Field(default=None, max_length=200)
    top_p: StrictFloat | StrictInt | None = None
    temperature: StrictFloat | StrictInt | None = None
    frequency_penalty: StrictFloat | StrictInt | None = None
    presence_penalty: StrictFloat | StrictInt | None = None
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    stop: StrictStr | list[StrictStr] | None = None
    n: StrictInt | None = Field(default=1, ge=1, le=1)
    seed: StrictInt | None = None
    tools: list[dict[str, Any]] | None = None
    session_id: StrictStr | None = Field(
        default=None, min_length=1, max_length=MAX_SESSION_ID_CHARS
    )
    # What the run does when its session is busy (docs/protocols/multitask.md).
    multitask: Literal["reject", "enqueue", "interrupt", "rollback"] | None = None

    def kept(self) -> dict[str, Any]:
        """What the request asked beyond its input, as sent (``Run.request``)."""
        return {
            name: value
            for name in KEPT_FIELDS
            if name in self.model_fields_set and (value := getattr(self, name)) is not None
        }


class ApprovalRequest(AgentRequest):
    """A request answering the session's approval requests: its input is one
    ``mcp_approval_response`` message."""

    input: list[ApprovalResponse] = Field(min_length=1, max_length=1)  # type: ignore[assignment]


def _answers_approvals(data: dict[str, Any]) -> bool:
    items = data.get("input")
    return (
        isinstance(items, list)
        and bool(items)
        and isinstance(items[0], dict)
        and items[0].get("type") == "mcp_approval_response"
    )


def agent_request_parse(data: Any) -> AgentRequest:
    """The body as an ``AgentRequest``; ``BodyInvalid`` naming each problem otherwise."""
    if not isinstance(data, dict):
        raise BodyInvalid("the body must be a JSON object (an AgentRequest)")
    model = ApprovalRequest if _answers_approvals(data) else AgentRequest
    try:
        request = model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors(include_url=False, include_input=False)
        ]
        raise BodyInvalid(f"invalid AgentRequest: {'; '.join(problems)}") from None
    message = request.input[0]
    if isinstance(message, ApprovalResponse):
        return request
    assert isinstance(message, Message)
    content = message.content
    for index, part in enumerate(content):
        needed = "text" if part.type == "text" else "image_url"
        if getattr(part, needed) is None:
            raise BodyInvalid(
                f"invalid AgentRequest: input.0.content.{index}.{needed}: "
                f"required for {part.type} content"
            )
    images = [part for part in content if part.type == "image"]
    if len(images) > MAX_IMAGES:
        raise BodyInvalid(f"invalid AgentRequest: input.0.content: at most {MAX_IMAGES} images")
    if not images and not any((part.text or "").strip() for part in content):
        raise BodyInvalid("invalid AgentRequest: input.0.content: the message is empty")
    if sum(len(part.text or "") for part in content) > MAX_TEXT_CHARS:
        raise BodyInvalid(
            f"invalid AgentRequest: input.0.content: the text exceeds {MAX_TEXT_CHARS} characters"
        )
    return request


def request_run_input(*, request: AgentRequest, thread_id: uuid.UUID) -> RunAgentInput:
    """The request's new user message as the core's command: one chat turn of the session's
    thread, run as the response ``response_<uuid>``. Images become binary blocks naming
    their signed URL (the core resolves it to the caller's stored object)."""
    message = request.input[0]
    if isinstance(message, ApprovalResponse):
        return _approval_run_input(message, thread_id=thread_id)
    blocks: list[TextContentBlock | BinaryContentBlock] = []
    for part in message.content:
        if part.text is not None and part.type == "text":
            blocks.append(TextContentBlock(type="text", text=part.text))
        elif part.image_url is not None:
            # The stored type is the one the object's bytes say (run_create sniffs it).
            blocks.append(
                BinaryContentBlock(type="binary", mime_type="image/*", url=part.image_url)
            )
    return RunAgentInput(
        thread_id=thread_id,
        run_id=f"response_{uuid.uuid4()}",
        messages=[InputMessage(id=f"msg_{uuid.uuid4()}", role="user", content=blocks)],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def _approval_run_input(message: ApprovalResponse, *, thread_id: uuid.UUID) -> RunAgentInput:
    """Answers to the session's approval requests as the core's command: a run with no new
    message that resumes the run they stopped (every open one must be answered)."""
    resume = []
    for part in message.content:
        answer = part.data
        payload: dict[str, Any] = {"approved": answer.approve}
        if answer.reason is not None:
            payload["reason"] = answer.reason
        if answer.arguments is not None:
            payload["arguments"] = answer.arguments
        resume.append(
            ResumeEntry(interrupt_id=answer.approval_request_id, status="resolved", payload=payload)
        )
    return RunAgentInput(
        thread_id=thread_id,
        run_id=f"response_{uuid.uuid4()}",
        messages=[],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
        resume=resume,
    )
