"""What a ``POST /responses`` carries, checked before anything is stored: the JSON body
(``json_input.JsonBodyParser``), its fields (``ResponseCreate``, the subset of the SDK's
``ResponseCreateParams`` the server takes) and its input as the core's ``RunAgentInput``: a
user message, or ``mcp_approval_response`` items answering the approval requests of
``previous_response_id``. docs/protocols/openai-responses.md, Request fields and Approvals.
Pure but for reading the request stream."""

import uuid
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictStr,
    Tag,
    ValidationError,
)

from agent_runs.api.json_input import NOT_BLANK_PATTERN
from agent_runs.errors import MultitaskInvalid
from agent_runs.protocols.openai_responses.errors import ResponsesError
from agent_runs.run_input import (
    ForwardedProps,
    InputMessage,
    ResumeEntry,
    RunAgentInput,
    multitask_parse,
)

MAX_INPUT_CHARS = 100_000
# OpenAI's limits on ``metadata``: 16 pairs, keys of 64 characters, values of 512.
MAX_METADATA_PAIRS = 16
# An approval's ``reason`` as the interrupt's ``responseSchema`` takes it
# (agent_runs/services/interrupts.py, approval_schema).
MAX_REASON_CHARS = 2000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputText(_Strict):
    type: Literal["input_text"]
    text: StrictStr


def _content_schema(schema: dict[str, Any]) -> None:
    """A user message's content as ``_message_check`` takes it: some text, at most
    ``MAX_INPUT_CHARS`` of it (as a list, joined by newlines: the schema bounds each part)."""
    text, parts = schema["anyOf"]
    text.update(maxLength=MAX_INPUT_CHARS, pattern=NOT_BLANK_PATTERN)
    parts["items"] = {**parts["items"], "properties": {"text": {"maxLength": MAX_INPUT_CHARS}}}
    parts.update(minItems=1, contains={"properties": {"text": {"pattern": NOT_BLANK_PATTERN}}})


class InputMessageItem(_Strict):
    """An input message (``EasyInputMessage`` or a ``message`` item) of the user's."""

    type: Literal["message"] = "message"
    role: Literal["user"]
    content: StrictStr | list[InputText] = Field(json_schema_extra=_content_schema)


class McpApprovalResponseItem(_Strict):
    """An answer to an approval request (``ResponseInputItem``'s ``McpApprovalResponse``):
    ``approval_request_id`` names an ``mcp_approval_request`` item of the previous response
    (an interrupt's id)."""

    type: Literal["mcp_approval_response"]
    approval_request_id: StrictStr = Field(min_length=1, max_length=40)
    approve: StrictBool
    reason: StrictStr | None = Field(default=None, max_length=MAX_REASON_CHARS)
    id: StrictStr | None = Field(default=None, max_length=200)


def _item_kind(value: Any) -> str | None:
    """The input item's union member, by its ``type`` (a message may leave it out). The
    tags are capitalised so that a validation error's place leaves them out (``_param``)."""
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", None)
    return _ITEM_TAGS.get(kind) if isinstance(kind, str) else None


_ITEM_TAGS = {"message": "Message", "mcp_approval_response": "McpApprovalResponse"}

InputItem = Annotated[
    Annotated[InputMessageItem, Tag("Message")]
    | Annotated[McpApprovalResponseItem, Tag("McpApprovalResponse")],
    Discriminator(
        _item_kind,
        custom_error_type="invalid_item",
        custom_error_message="an input item is a user message or an mcp_approval_response",
    ),
]


class ConversationRef(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: StrictStr = Field(min_length=1, max_length=200)


def _input_schema(schema: dict[str, Any]) -> None:
    """``input`` as ``_body_check`` takes it: some text (``_content_schema``), one user
    message, or ``mcp_approval_response`` items (not both)."""
    text, items = schema["anyOf"]
    message, approval = items["items"]["oneOf"]
    text.update(maxLength=MAX_INPUT_CHARS, pattern=NOT_BLANK_PATTERN)
    schema["anyOf"] = [
        text,
        {"type": "array", "items": message, "minItems": 1, "maxItems": 1},
        {"type": "array", "items": approval, "minItems": 1},
    ]


_GIVEN = {"not": {"type": "null"}}


def _response_create_schema(schema: dict[str, Any]) -> None:
    """What ``_body_check`` asks of the fields together: approvals answer a
    ``previous_response_id``, which goes without ``conversation``; no ``tools``; ``metadata``
    within OpenAI's limits. (Approval request ids answered once each: no schema says it.)"""
    schema["allOf"] = [
        {
            "anyOf": [
                {
                    "properties": {
                        "input": {
                            "anyOf": [
                                {"type": "string"},
                                {"items": {"properties": {"type": {"const": "message"}}}},
                            ]
                        }
                    }
                },
                {
                    "required": ["previous_response_id"],
                    "properties": {"previous_response_id": _GIVEN},
                },
            ]
        },
        {
            "not": {
                "required": ["previous_response_id", "conversation"],
                "properties": {"previous_response_id": _GIVEN, "conversation": _GIVEN},
            }
        },
    ]
    properties = schema["properties"]
    properties["tools"]["anyOf"][0]["maxItems"] = 0
    metadata = properties["metadata"]["anyOf"][0]
    metadata["maxProperties"] = MAX_METADATA_PAIRS
    metadata["propertyNames"] = {"maxLength": 64}
    metadata["additionalProperties"] = {"type": "string", "maxLength": 512}


class ResponseCreate(BaseModel):
    """The body of ``POST /responses``. Fields of ``ResponseCreateParams`` not named here
    (``temperature``, ``reasoning``, ``text``…) are accepted and ignored: the server's
    configured stages decide how the agent runs."""

    model_config = ConfigDict(
        extra="ignore", frozen=True, json_schema_extra=_response_create_schema
    )

    model: StrictStr = Field(default="", max_length=200)
    input: StrictStr | list[InputItem] = Field(json_schema_extra=_input_schema)
    instructions: StrictStr | None = Field(default=None, max_length=MAX_INPUT_CHARS)
    previous_response_id: StrictStr | None = Field(default=None, max_length=200)
    conversation: StrictStr | ConversationRef | None = None
    stream: StrictBool | None = None
    background: StrictBool | None = None
    store: StrictBool | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    tools: list[Any] | None = None

    @property
    def multitask(self) -> str | None:
        """``metadata.multitask``: what the response does when its conversation is busy
        (docs/protocols/multitask.md); ``response_create_parse`` has checked it."""
        return multitask_parse((self.metadata or {}).get("multitask"), field="metadata.multitask")

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation

    @property
    def approvals(self) -> list[McpApprovalResponseItem]:
        """The ``mcp_approval_response`` items of the input."""
        if isinstance(self.input, str):
            return []
        return [item for item in self.input if isinstance(item, McpApprovalResponseItem)]

    @property
    def messages(self) -> list[InputMessageItem]:
        if isinstance(self.input, str):
            return []
        return [item for item in self.input if isinstance(item, InputMessageItem)]


def response_create_parse(data: Any) -> ResponseCreate:
    """The body as ``ResponseCreate``; a ``ResponsesError`` (400) naming the field at fault
    otherwise."""
    if not isinstance(data, dict):
        raise ResponsesError("The request body must be a JSON object.")
    try:
        body = ResponseCreate.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        # The error deepest in the body: a list ``input`` is not also told it is no string.
        error = max(errors, key=lambda found: len(found["loc"]))
        param = _param(error["loc"])
        if error["type"] == "missing":
            raise ResponsesError(
                f"Missing required parameter: '{param}'.",
                param=param,
                code="missing_required_parameter",
            ) from None
        raise ResponsesError(
            f"Invalid value for '{param}': {error['msg']}.", param=param, code="invalid_value"
        ) from None
    _body_check(body)
    return body


def _param(loc: tuple[int | str, ...]) -> str:
    """A validation error's place as OpenAI names a parameter (``input[0].content``),
    without the union members pydantic puts in it (``str``, ``list[InputText]``…)."""
    param = ""
    for part in loc:
        if isinstance(part, int):
            param += f"[{part}]"
        elif not _is_member_tag(part):
            param += f".{part}" if param else part
    return param


def _is_member_tag(part: str) -> bool:
    return "[" in part or part[:1].isupper() or part in ("str", "int", "bool", "float")


def _body_check(body: ResponseCreate) -> None:
    """What the model's types cannot say."""
    if body.previous_response_id is not None and body.conversation is not None:
        raise ResponsesError(
            "Mutually exclusive parameters: 'previous_response_id' and 'conversation'.",
            param="previous_response_id",
            code="mutually_exclusive_parameters",
        )
    if body.approvals:
        _approvals_check(body)
    else:
        _message_check(body)
    if body.tools:
        raise ResponsesError(
            "'tools' is not supported: the agent's own tools run on the server (as mcp_call "
            "items).",
            param="tools",
            code="unsupported_parameter",
        )
    metadata = body.metadata or {}
    if len(metadata) > MAX_METADATA_PAIRS or any(
        len(key) > 64 or len(value) > 512 for key, value in metadata.items()
    ):
        raise ResponsesError(
            "'metadata' holds at most 16 pairs, keys of up to 64 characters and values of up "
            "to 512.",
            param="metadata",
            code="invalid_value",
        )
    _multitask_check(metadata)


def _multitask_check(metadata: dict[str, str]) -> None:
    """``metadata.multitask``, when given, names a strategy (docs/protocols/multitask.md)."""
    try:
        multitask_parse(metadata.get("multitask"), field="metadata.multitask")
    except MultitaskInvalid as exc:
        raise ResponsesError(str(exc), param="metadata.multitask", code="invalid_value") from None


def _message_check(body: ResponseCreate) -> None:
    text = input_text(body)
    if not text.strip():
        raise ResponsesError("'input' must hold some text.", param="input", code="invalid_value")
    if len(text) > MAX_INPUT_CHARS:
        raise ResponsesError(
            f"'input' is longer than {MAX_INPUT_CHARS} characters.",
            param="input",
            code="invalid_value",
        )
    if isinstance(body.input, list) and len(body.input) != 1:
        raise ResponsesError(
            "'input' holds one user message: earlier turns come from 'previous_response_id' "
            "or 'conversation'.",
            param="input",
            code="invalid_value",
        )


def _approvals_check(body: ResponseCreate) -> None:
    """``mcp_approval_response`` items answer the approval requests of
    ``previous_response_id``, alone (no user message beside them), each once."""
    if body.messages:
        raise ResponsesError(
            "'input' holds either one user message or mcp_approval_response items, not both: "
            "answer the approval requests first.",
            param="input",
            code="invalid_value",
        )
    if body.previous_response_id is None:
        raise ResponsesError(
            "Missing required parameter: 'previous_response_id' (the response whose approval "
            "requests the mcp_approval_response items answer).",
            param="previous_response_id",
            code="missing_required_parameter",
        )
    seen: set[str] = set()
    for index, item in enumerate(body.approvals):
        if item.approval_request_id in seen:
            raise ResponsesError(
                f"Approval request '{item.approval_request_id}' is answered twice.",
                param=f"input[{index}].approval_request_id",
                code="invalid_value",
            )
        seen.add(item.approval_request_id)


def input_text(body: ResponseCreate) -> str:
    """The user's text: the ``input`` string, or its message's text parts joined."""
    if isinstance(body.input, str):
        return body.input
    content = body.messages[0].content if body.messages else ""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content)


def new_response_id() -> str:
    """A response's id: its run's runId."""
    return f"resp_{uuid.uuid4().hex}"


def response_run_input(*, thread_id: uuid.UUID, response_id: str, text: str) -> RunAgentInput:
    """A response's input as the core's command: one new chat turn of the thread."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=response_id,
        messages=[InputMessage(id=f"msg_{uuid.uuid4().hex}", role="user", content=text)],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def approvals_run_input(
    *, thread_id: uuid.UUID, response_id: str, approvals: list[McpApprovalResponseItem]
) -> RunAgentInput:
    """A response that answers approval requests as the core's command: a run that goes on
    with the held reply, each request resolved with ``{"approved", "reason"?}`` (a rejection
    too: the tool's result tells the model the user declined)."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=response_id,
        messages=[],
        resume=[
            ResumeEntry(
                interrupt_id=item.approval_request_id,
                status="resolved",
                payload={"approved": item.approve}
                | ({"reason": item.reason} if item.reason is not None else {}),
            )
            for item in approvals
        ],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def response_request(body: ResponseCreate, *, previous_response_id: str | None) -> dict[str, Any]:
    """What the request asked beyond its input, kept with the run (``Run.request``) to
    answer it back in every ``Response``."""
    conversation = body.conversation_id
    return {
        "model": body.model,
        "instructions": body.instructions,
        "metadata": body.metadata or {},
        "background": bool(body.background),
        "store": body.store if body.store is not None else True,
        "previous_response_id": previous_response_id,
        "conversation": {"id": conversation} if conversation is not None else None,
        "tools": [],
    }
