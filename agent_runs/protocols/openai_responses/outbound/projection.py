"""``ResponseProjection``: a run's journal, event by event, as the Responses stream events
and the ``Response`` they describe; the package's docstring says how (outbound/__init__.py)."""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_runs.events.codec import RUN_INTERRUPTED_EVENT
from agent_runs.protocols.openai_responses.outbound.wire import (
    WireEvent,
    wire_event,
    wire_response,
)

# The server label of the agent's own (server-executed) tools, as ``mcp_call`` items.
SERVER_LABEL = "agent"
# The ``RUN_ERROR`` code of a cancelled run (agent_runs/services/lifecycle.py).
CANCELLED_CODE = "cancelled"
# The codes ``Response.error.code`` may carry; any other failure is a ``server_error``.
_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})


class ResponseProjection:
    """One run's journal, event by event, as Responses stream events, keeping the response
    it describes (``response``): its status, output items and, once ended, usage.

    ``head`` holds the ``Response`` fields that do not come from the journal (``id``,
    ``created_at``, ``model``, ``instructions``, ``metadata``, ``background``, …).
    ``approvals``: for a run that goes on with a held reply, the approval request (interrupt
    id) of each tool call it was held on, by tool call id."""

    def __init__(self, head: Mapping[str, Any], approvals: Mapping[str, str] | None = None) -> None:
        self.head = dict(head)
        self.approvals = dict(approvals or {})
        # The run stopped on approval requests: the response ends ``incomplete``.
        self.held = False
        self.status = "queued" if self.head.get("background") else "in_progress"
        self.output: list[dict[str, Any]] = []
        self.error: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.next_sequence = 0
        self.started = False
        self.ended = False
        self._open: dict[str, int] = {}  # a message's or tool call's id -> its output index
        self._texts: dict[int, str] = {}  # an open message's output index -> its text so far

    @property
    def response(self) -> dict[str, Any]:
        """The response as it stands, whole."""
        return {
            **self.head,
            "object": "response",
            "status": self.status,
            "output": [self._item_now(index) for index in range(len(self.output))],
            "error": self.error,
            # The SDK's reasons (max_output_tokens, content_filter…) name none for an
            # approval: the reason is null, the mcp_approval_request items say why.
            "incomplete_details": {"reason": None} if self.status == "incomplete" else None,
            "usage": self.usage,
        }

    def _item_now(self, index: int) -> dict[str, Any]:
        item = dict(self.output[index])
        if index in self._texts:  # a message still being written: its text so far
            item["content"] = [_text_part(self._texts[index])]
        return item

    def translate(
        self, payload: Mapping[str, Any], *, usage: dict[str, Any] | None = None
    ) -> list[WireEvent]:
        """The stream events of one journal event of the run (often none), in order.
        ``usage``: the run's recorded usage, given with its terminal event."""
        if self.ended:
            return []
        handler = _HANDLERS.get(str(payload.get("type")))
        if handler is None:
            return []
        events = handler(self, payload, usage)
        wired = []
        for event in events:
            event["sequence_number"] = self.next_sequence
            self.next_sequence += 1
            wired.append(wire_event(event))
        return wired

    # Lifecycle.

    def _lifecycle(self, kind: str) -> dict[str, Any]:
        return {"type": kind, "response": self.response}

    def _run_started(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        if self.started:
            return []
        self.started = True
        created = self._lifecycle("response.created")
        self.status = "in_progress"
        return [created, self._lifecycle("response.in_progress")]

    def _run_finished(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        self.ended = True
        self.usage = usage
        if self.held:
            self.status = "incomplete"
            return [self._lifecycle("response.incomplete")]
        self.status = "completed"
        return [self._lifecycle("response.completed")]

    # Approvals.

    def _custom(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        """The run stops on approvals: each held call's ``mcp_call`` item ends
        ``incomplete``, naming its approval request, and an ``mcp_approval_request`` item is
        added for each (``id``: the interrupt's)."""
        if payload.get("name") != RUN_INTERRUPTED_EVENT:
            return []
        value = payload.get("value")
        interrupts = value.get("interrupts") if isinstance(value, Mapping) else None
        events: list[dict[str, Any]] = []
        for interrupt in interrupts if isinstance(interrupts, list) else []:
            if isinstance(interrupt, Mapping) and interrupt.get("id"):
                events += self._approval_request(interrupt)
        return events

    def _approval_request(self, interrupt: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.held = True
        events: list[dict[str, Any]] = []
        metadata = interrupt.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        # The arguments as the model wrote them (its call's), else as stored.
        arguments = json.dumps(metadata.get("arguments") or {}, ensure_ascii=False)
        found = self._tool_item({"toolCallId": interrupt.get("toolCallId")})
        if found is not None:
            index, call = found
            del self._open[f"t:{interrupt.get('toolCallId')}"]
            call.update(status="incomplete", approval_request_id=str(interrupt["id"]))
            arguments = call["arguments"] or arguments
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": dict(call)}
            )
        item = {
            "id": str(interrupt["id"]),
            "type": "mcp_approval_request",
            "server_label": SERVER_LABEL,
            "name": str(metadata.get("toolName") or ""),
            "arguments": arguments,
        }
        index = len(self.output)
        self.output.append(item)
        return [
            *events,
            {"type": "response.output_item.added", "output_index": index, "item": dict(item)},
            {"type": "response.output_item.done", "output_index": index, "item": dict(item)},
        ]

    def _run_error(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        """A failure is ``response.failed``; a cancel, for which the API has no event,
        ``response.incomplete`` with the status ``cancelled``."""
        self.ended = True
        self.usage = usage
        for index in self._open.values():
            self.output[index]["status"] = "incomplete"
        self._open.clear()
        if payload.get("code") == CANCELLED_CODE:
            self.status = "cancelled"
            return [self._lifecycle("response.incomplete")]
        self.status = "failed"
        code = str(payload.get("code") or "")
        self.error = {
            "code": code if code in _ERROR_CODES else "server_error",
            "message": str(payload.get("message") or "the run failed"),
        }
        return [self._lifecycle("response.failed")]

    # Messages.

    def _message_start(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        index = len(self.output)
        item_id = f"msg_{payload.get('messageId', index)}"
        self._open[f"m:{payload.get('messageId')}"] = index
        self.output.append(
            {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        )
        self._texts[index] = ""
        added = {"type": "response.output_item.added", "output_index": index}
        return [
            added | {"item": dict(self.output[index])},
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": _text_part(""),
            },
        ]

    def _message_item(self, payload: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        index = self._open.get(f"m:{payload.get('messageId')}")
        return None if index is None else (index, self.output[index])

    def _message_content(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        found = self._message_item(payload)
        if found is None:
            return []
        index, item = found
        delta = str(payload.get("delta", ""))
        self._texts[index] += delta
        return [
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
        ]

    def _message_end(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        found = self._message_item(payload)
        if found is None:
            return []
        index, item = found
        del self._open[f"m:{payload.get('messageId')}"]
        text = self._texts.pop(index)
        part = _text_part(text)
        item.update(status="completed", content=[part])
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": part},
            {"type": "response.output_item.done", "output_index": index, "item": dict(item)},
        ]

    # The agent's tools: server-executed, so ``mcp_call`` items (a ``function_call`` would
    # tell the client to run it).

    def _tool_item(self, payload: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        call_id = payload.get("toolCallId") or payload.get("tool_call_id")
        index = self._open.get(f"t:{call_id}")
        return None if index is None else (index, self.output[index])

    def _tool_start(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        index = len(self.output)
        call_id = payload.get("toolCallId")
        self._open[f"t:{call_id}"] = index
        item = {
            "id": f"mcp_{call_id}",
            "type": "mcp_call",
            "name": str(payload.get("toolCallName") or ""),
            "server_label": SERVER_LABEL,
            "arguments": "",
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self.output.append(item)
        where = {"item_id": item["id"], "output_index": index}
        return [
            {"type": "response.output_item.added", "output_index": index, "item": dict(item)},
            {"type": "response.mcp_call.in_progress", **where},
        ]

    def _tool_args(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        found = self._tool_item(payload)
        if found is None:
            return []
        index, item = found
        delta = str(payload.get("delta", ""))
        item["arguments"] += delta
        where = {"item_id": item["id"], "output_index": index}
        return [{"type": "response.mcp_call_arguments.delta", **where, "delta": delta}]

    def _tool_end(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        found = self._tool_item(payload)
        if found is None:
            return []
        index, item = found
        where = {"item_id": item["id"], "output_index": index}
        return [
            {"type": "response.mcp_call_arguments.done", **where, "arguments": item["arguments"]}
        ]

    def _tool_result(self, payload: Mapping[str, Any], usage: Any) -> list[dict[str, Any]]:
        found = self._tool_item(payload)
        added: list[dict[str, Any]] = []
        if found is None:
            call_id = str(payload.get("toolCallId") or payload.get("tool_call_id") or "")
            if call_id not in self.approvals:
                return []
            added, found = self._answered_call(call_id, payload)
        index, item = found
        del self._open[f"t:{item['id'].removeprefix('mcp_')}"]
        content = payload.get("content")
        output = content if isinstance(content, str) else None
        where = {"item_id": item["id"], "output_index": index}
        if payload.get("status", "success") == "success":
            item.update(status="completed", output=output)
            done = {"type": "response.mcp_call.completed", **where}
        else:
            failure = payload.get("error") or content or "the tool failed"
            error = {"type": "mcp_tool_execution_error", "content": str(failure)}
            item.update(status="failed", output=output, error=error)
            done = {"type": "response.mcp_call.failed", **where}
        return [
            *added,
            done,
            {"type": "response.output_item.done", "output_index": index, "item": dict(item)},
        ]

    def _answered_call(
        self, call_id: str, payload: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], tuple[int, dict[str, Any]]]:
        """A call the held reply stopped on, answered: its ``mcp_call`` item (named by its
        approval request) is added when its result comes, the call having been made in the
        run held."""
        index = len(self.output)
        self._open[f"t:{call_id}"] = index
        arguments = payload.get("tool_call_args")
        item = {
            "id": f"mcp_{call_id}",
            "type": "mcp_call",
            "name": str(payload.get("tool_name") or ""),
            "server_label": SERVER_LABEL,
            "arguments": json.dumps(arguments if arguments is not None else {}, ensure_ascii=False),
            "approval_request_id": self.approvals[call_id],
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self.output.append(item)
        added = {"type": "response.output_item.added", "output_index": index, "item": dict(item)}
        return [added], (index, item)


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


_HANDLERS = {
    "RUN_STARTED": ResponseProjection._run_started,
    "RUN_FINISHED": ResponseProjection._run_finished,
    "RUN_ERROR": ResponseProjection._run_error,
    "TEXT_MESSAGE_START": ResponseProjection._message_start,
    "TEXT_MESSAGE_CONTENT": ResponseProjection._message_content,
    "TEXT_MESSAGE_END": ResponseProjection._message_end,
    "TOOL_CALL_START": ResponseProjection._tool_start,
    "TOOL_CALL_ARGS": ResponseProjection._tool_args,
    "TOOL_CALL_END": ResponseProjection._tool_end,
    "TOOL_CALL_RESULT": ResponseProjection._tool_result,
    "CUSTOM": ResponseProjection._custom,
}


def is_terminal(payload: Mapping[str, Any]) -> bool:
    """Whether a journal event ends its run (its stream event carries the usage)."""
    return payload.get("type") in ("RUN_FINISHED", "RUN_ERROR")


def response_of_journal(
    *,
    head: Mapping[str, Any],
    payloads: Sequence[Mapping[str, Any]],
    status: str,
    usage: dict[str, Any] | None,
    approvals: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``Response`` of a run as it stands: its journal so far folded, with ``status``
    the run row's (a run cancelled before its journal began has no events; a run that
    ended on approvals is ``completed`` there and ``incomplete`` here) and its usage."""
    projection = ResponseProjection(head, approvals)
    for payload in payloads:
        projection.translate(payload, usage=usage)
    response = projection.response
    if not (status == "completed" and projection.status == "incomplete"):
        response["status"] = status
        response["incomplete_details"] = None
    response["usage"] = usage
    if status == "failed" and response["error"] is None:
        response["error"] = {"code": "server_error", "message": "the run failed"}
    return wire_response(response)
