"""The AG-UI edge's inbound side, the parsing of ``RunAgentInput``: the spec's validation
rules, in order.

docs/spec/run-agent-input.md: Validation Rules, forwardedProps, Compatibility Notes.
"""

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from agent_runs.api.json_input import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    json_decode,
    json_unstorable_place,
)
from agent_runs.errors import EventCursorInvalid, RunInputInvalid
from agent_runs.run_input import RunAgentInput, iana_timezones, parse_uuid, user_text

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_RUN_ID_LENGTH = 128
MAX_MESSAGES = 200
# The AG-UI conversation endpoint: the body holds the whole conversation, every turn.
CONVERSATION_MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
CONVERSATION_MAX_MESSAGES = 2000
MAX_MESSAGE_ID_LENGTH = 128
MAX_USER_TEXT_CHARS = 10_000
MAX_ATTACHMENTS_PER_MESSAGE = 3
# The largest epoch in milliseconds that a datetime can hold (9999-12-31T23:59:59.999Z).
MAX_EPOCH_MS = 253_402_300_799_999
RFC3339_WITH_OFFSET = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_FORWARDED_PROPS_KEYS = {"runtime_mode", "client_time"}


def parse_run_agent_input(raw: Any, *, ignored: frozenset[str] = frozenset()) -> RunAgentInput:
    """Validate a decoded request body (docs/spec/run-agent-input.md, Validation Rules).

    The rules run in the order of the spec's table, so each message is exactly the spec's;
    anything the table does not cover (a wrong type, a missing field) is reported as
    ``invalid RunAgentInput.<field path>``. After the table, what the store cannot keep:
    nesting deeper than ``MAX_JSON_DEPTH``, a NUL or a lone surrogate in any string or key
    (PostgreSQL's text and jsonb refuse the one, UTF-8 cannot encode the other), and a
    ``parentRunId`` longer than a ``runId``; each names its place in the body. The
    ``ignored`` fields are then left out, held to that rule like any field the model ignores.
    """
    if not isinstance(raw, dict):
        raise RunInputInvalid("invalid RunAgentInput: the body must be a JSON object")
    data = _camel_keys(raw)
    _check_rules(data)
    _check_storable(data)
    data = {key: value for key, value in data.items() if key not in ignored}
    parent_run_id = data.get("parentRunId")
    if isinstance(parent_run_id, str) and len(parent_run_id) > MAX_RUN_ID_LENGTH:
        raise RunInputInvalid("invalid RunAgentInput.parentRunId: exceeds length limit")
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise RunInputInvalid(_describe(exc)) from None


@dataclass(frozen=True)
class ConversationTurn:
    """A turn of a conversation an AG-UI client holds: the run of its new user message, and
    the ids of the messages before it (each must be one the thread already has)."""

    run_input: RunAgentInput
    # None: a run's input on its own, not a turn of a conversation (the /runs endpoint).
    earlier_message_ids: tuple[str, ...] | None


# Top-level fields AG-UI 1.0 clients send that this server has no use for: accepted, not
# kept (the run endpoint's model ignores them the same way).
_CLIENT_ENVELOPE_KEYS = ("protocolVersion",)


def _conversation_messages(messages: Any) -> list[dict[str, Any]]:
    """The conversation's messages, each an object with a ``role`` and an ``id``."""
    if not isinstance(messages, list):
        raise RunInputInvalid("invalid RunAgentInput.messages")
    if len(messages) > CONVERSATION_MAX_MESSAGES:
        raise RunInputInvalid("RunAgentInput.messages exceeds limit")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RunInputInvalid(f"invalid RunAgentInput.messages[{index}]")
        message_id = message.get("id")
        if not isinstance(message_id, str) or not 0 < len(message_id) <= MAX_MESSAGE_ID_LENGTH:
            raise RunInputInvalid(f"invalid RunAgentInput.messages[{index}].id")
    return messages


def parse_conversation_turn(raw: Any) -> ConversationTurn:
    """A ``RunAgentInput`` whose ``messages`` is the whole conversation (what AG-UI clients
    send). The new turn is its last message, the user's: every rule of the spec applies to
    that message (its text, its images) and to the rest of the body, with
    ``forwardedProps.runtime_mode`` defaulting to ``chat``; the tool messages after the
    previous user message go with it (the results of the client's own tool calls, when the
    thread does not have them yet). A turn that answers the thread's open interrupts has no
    new user message: it ends with those tool messages, or carries ``resume``. Of the earlier
    messages only the ids are read: the thread has them already."""
    if not isinstance(raw, dict):
        raise RunInputInvalid("invalid RunAgentInput: the body must be a JSON object")
    data = {key: value for key, value in raw.items() if key not in _CLIENT_ENVELOPE_KEYS}
    messages = _conversation_messages(data.get("messages"))
    resumes = bool(data.get("resume"))
    ends_with_user = bool(messages) and messages[-1]["role"] == "user"
    end = len(messages) - 1 if ends_with_user else len(messages)
    since = max((i + 1 for i in range(end) if messages[i]["role"] == "user"), default=0)
    answers = [message for message in messages[since:end] if message["role"] == "tool"]
    if not ends_with_user and not resumes and not answers:
        raise RunInputInvalid("RunAgentInput.messages must end with the new user message")
    props = data.get("forwardedProps", data.get("forwarded_props"))
    if props is None or (isinstance(props, dict) and "runtime_mode" not in props):
        props = {**(props or {}), "runtime_mode": "chat"}
    data.pop("forwarded_props", None)
    answer_ids = {message["id"] for message in answers}
    earlier = tuple(
        dict.fromkeys(
            message["id"] for message in messages[:end] if message["id"] not in answer_ids
        )
    )
    if not ends_with_user:
        turn = {**data, "messages": answers, "forwardedProps": props}
        return ConversationTurn(run_input=_parse_answering_turn(turn), earlier_message_ids=earlier)
    turn = {**data, "messages": [messages[end], *answers], "forwardedProps": props}
    try:
        run_input = parse_run_agent_input(turn)
    except RunInputInvalid as exc:
        # Named by its place in the conversation the client sent, not in the turn.
        message = str(exc).replace("RunAgentInput.messages[0]", f"RunAgentInput.messages[{end}]")
        raise RunInputInvalid(message) from None
    return ConversationTurn(run_input=run_input, earlier_message_ids=earlier)


def _parse_answering_turn(data: dict[str, Any]) -> RunAgentInput:
    """A turn without a new user message, answering the thread's open interrupts: the
    spec's rules that apply to it (ids, forwardedProps, what the store can keep)."""
    thread_id = data.get("threadId", data.get("thread_id"))
    if not isinstance(thread_id, str) or parse_uuid(thread_id) is None:
        raise RunInputInvalid("threadId must be a valid UUID")
    data = _camel_keys(data)
    run_id = data.get("runId")
    if not isinstance(run_id, str) or not run_id.strip():
        raise RunInputInvalid("invalid RunAgentInput.runId")
    if len(run_id) > MAX_RUN_ID_LENGTH:
        raise RunInputInvalid("runId exceeds length limit")
    _check_forwarded_props(data.get("forwardedProps"))
    _check_storable(data)
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise RunInputInvalid(_describe(exc)) from None


def _check_rules(data: dict[str, Any]) -> None:
    thread_id = data.get("threadId")
    if not isinstance(thread_id, str) or parse_uuid(thread_id) is None:
        raise RunInputInvalid("threadId must be a valid UUID")
    run_id = data.get("runId")
    if not isinstance(run_id, str) or not run_id.strip():
        raise RunInputInvalid("invalid RunAgentInput.runId")
    if len(run_id) > MAX_RUN_ID_LENGTH:
        raise RunInputInvalid("runId exceeds length limit")
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise RunInputInvalid("invalid RunAgentInput.messages")
    if len(messages) > MAX_MESSAGES:
        raise RunInputInvalid("RunAgentInput.messages exceeds limit")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RunInputInvalid(f"invalid RunAgentInput.messages[{index}]")
    user_indexes = [index for index, message in enumerate(messages) if message["role"] == "user"]
    for index in user_indexes:
        if len(user_text(_user_content(messages[index], index))) > MAX_USER_TEXT_CHARS:
            raise RunInputInvalid("RunAgentInput user message text exceeds limit")
    _check_forwarded_props(data.get("forwardedProps"))
    if len(user_indexes) != 1:
        raise RunInputInvalid("RunAgentInput.messages must contain exactly one user message")
    if messages[0]["role"] != "user":
        raise RunInputInvalid("RunAgentInput.messages[0].role must be user")
    content = messages[0]["content"]
    _check_binary_blocks(content)
    if not user_text(content).strip() and not _binary_blocks(content):
        raise RunInputInvalid("invalid RunAgentInput.messages[0].content: the message is empty")


def _check_storable(data: dict[str, Any]) -> None:
    """The depth limit, and no NUL or lone surrogate in any string or key; the message names
    the place (``invalid RunAgentInput.state.items[2]``)."""
    place = json_unstorable_place(data)
    if place is not None:
        path, reason = place
        raise RunInputInvalid(f"invalid RunAgentInput{path}: {reason}")


def decode_json_body(body: bytes) -> Any:
    """The JSON value of a request body (``agent_runs.api.json_input.json_decode``); one nested
    too deep for the decoder is a ``RunInputInvalid`` (422), the answer the depth rule of
    ``parse_run_agent_input`` gives to shallower ones."""
    try:
        return json_decode(body)
    except JsonTooDeep:
        raise RunInputInvalid(
            f"invalid RunAgentInput: nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None


def _user_content(message: dict[str, Any], index: int) -> str | list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(block, dict) for block in content):
        return content
    raise RunInputInvalid(f"invalid RunAgentInput.messages[{index}].content")


def _check_forwarded_props(props: Any) -> None:
    """docs/spec/run-agent-input.md, forwardedProps Schema: the spec's message, then what was
    expected."""
    if props is None:
        raise _forwarded_props_invalid(_RUNTIME_MODE_REQUIRED)
    if not isinstance(props, dict):
        raise _forwarded_props_invalid(
            'must be an object such as {"runtime_mode": "chat"} (or "automation")'
        )
    extra = sorted(set(props) - _FORWARDED_PROPS_KEYS)
    if extra:
        # ASCII-escaped and cut short: the key is the client's, of any length.
        raise _forwarded_props_invalid(
            f"unexpected field {json.dumps(extra[0][:64])}: only runtime_mode and client_time "
            "are allowed"
        )
    if "runtime_mode" not in props:
        raise _forwarded_props_invalid(_RUNTIME_MODE_REQUIRED)
    if props["runtime_mode"] not in ("chat", "automation"):
        raise _forwarded_props_invalid('runtime_mode must be "chat" or "automation"')
    if "client_time" not in props:
        return
    client_time = props["client_time"]
    if not isinstance(client_time, dict):
        raise _forwarded_props_invalid(
            "client_time must be an object with device_timezone, client_now_iso and client_epoch_ms"
        )
    timezone = client_time.get("device_timezone")
    if not isinstance(timezone, str) or timezone not in iana_timezones():
        raise RunInputInvalid("invalid client_time.device_timezone")
    if not _is_rfc3339_with_offset(client_time.get("client_now_iso")):
        raise RunInputInvalid("invalid client_time.client_now_iso")
    epoch_ms = client_time.get("client_epoch_ms")
    if isinstance(epoch_ms, float) and epoch_ms.is_integer():
        epoch_ms = int(epoch_ms)  # JSON has one kind of number: 1.0 is the integer 1
    if (
        not isinstance(epoch_ms, int)
        or isinstance(epoch_ms, bool)
        or not 0 <= epoch_ms <= MAX_EPOCH_MS
    ):
        raise RunInputInvalid("invalid client_time.client_epoch_ms")


_RUNTIME_MODE_REQUIRED = 'runtime_mode is required ("chat" or "automation")'


def _forwarded_props_invalid(hint: str) -> RunInputInvalid:
    """The spec's message for a bad ``forwardedProps``, kept as the prefix, and a hint."""
    return RunInputInvalid(f"invalid RunAgentInput.forwardedProps: {hint}")


def _binary_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    # Decoded JSON: the blocks are dicts (or junk the model validation reports later).
    return [block for block in content if isinstance(block, dict) and block.get("type") == "binary"]


def _check_binary_blocks(content: Any) -> None:
    binary_blocks = _binary_blocks(content)
    for block in binary_blocks:
        mime_type = block.get("mimeType")
        if not isinstance(mime_type, str) or not mime_type.lower().startswith("image/"):
            raise RunInputInvalid("binary content requires image mimeType")
        url = block.get("url")
        if not isinstance(url, str) or not url.strip():
            raise RunInputInvalid("binary content requires url")
        if block.get("data") is not None:
            raise RunInputInvalid("binary content data is not allowed")
    if len(binary_blocks) > MAX_ATTACHMENTS_PER_MESSAGE:
        raise RunInputInvalid("Too many attachments")


def _is_rfc3339_with_offset(value: Any) -> bool:
    if not isinstance(value, str) or not RFC3339_WITH_OFFSET.match(value):
        return False
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return parsed.tzinfo is not None


# Keys whose values are free-form JSON and are kept exactly as sent.
_OPAQUE_KEYS = {"state", "forwardedProps", "parameters", "function", "payload", "metadata"}


def _camel_keys(value: Any, depth: int = 0) -> Any:
    """Rename snake_case keys of the protocol's own objects to camelCase (Compatibility Notes).

    ``state``, ``forwardedProps`` and tool ``parameters`` are client data: left untouched.
    """
    if depth > 4:
        return value
    if isinstance(value, list):
        return [_camel_keys(item, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    renamed: dict[str, Any] = {}
    for key, item in value.items():
        camel = to_camel(key) if isinstance(key, str) else key
        if camel in renamed and camel != key:
            continue  # the camelCase spelling wins when a client sends both
        renamed[camel] = item if camel in _OPAQUE_KEYS else _camel_keys(item, depth + 1)
    return renamed


def _describe(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    path = ""
    for part in error["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in {"str", "list", "TextContentBlock", "BinaryContentBlock"}:
            break  # a union member's name, not a field
        else:
            path += f".{part}"
    return f"invalid RunAgentInput{path}: {error['msg']}"


# An event id: a positive integer that fits a BIGINT (ASCII digits only: "²".isdigit() holds).
_EVENT_ID = re.compile(r"[0-9]{1,18}")


def parse_event_cursor(value: str | None) -> int | None:
    """The event id a stream resumes after (``Last-Event-ID`` or ``lastEventId``), ``None``
    without one; anything else is an ``EventCursorInvalid`` (400)."""
    if value is None or value == "":
        return None
    if not _EVENT_ID.fullmatch(value.strip()):
        raise EventCursorInvalid()
    return int(value)
