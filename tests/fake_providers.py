"""Loopback servers speaking Anthropic's Messages SSE, Gemini's ``streamGenerateContent`` SSE
and Ollama's ``/api/chat`` NDJSON, so that the providers' real SDKs run in tests (the model
is faked only at the network boundary; tests/fake_llm.py is the OpenAI-shaped one).

Each answers as the OpenAI-shaped fake does: the router's decision when
``generate_structured_output`` is offered, then ``tool_call_turns`` one list per request,
then the worker's structured output (``GenerateStructuredOutput``) or a plain answer."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A tool call: (call id, tool name, arguments as a JSON object).
ToolCall = tuple[str, str, dict[str, Any]]


class FakeProvider:
    """The shared part: the server, the script, what was asked and what was abandoned."""

    content_type = "text/event-stream"

    def __init__(self) -> None:
        self.answer = ["Hello", " from", " the", " fake", " model."]
        self.status = 200  # another: every request is answered with the provider's error
        self.chunk_delay = 0.0  # seconds before each streamed item
        self.tool_call_turns: list[list[ToolCall]] = []
        # The worker's structured output; None: a plain answer, as a model ignoring the tool.
        self.output: dict[str, Any] | None = {"result_type": "unknown", "status": "success"}
        self.route: dict[str, Any] = {"route": "use_tools", "tools": []}
        self.requests: list[dict[str, Any]] = []
        # The requests (each with the count of items ``written``) whose client went away
        # before their answer's end.
        self.abandoned: list[dict[str, Any]] = []
        self.worker_turns = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = {"path": self.path, "headers": dict(self.headers), "body": body}
                fake.requests.append(request)
                if fake.status != 200:
                    data = json.dumps(fake.error_body(fake.status)).encode()
                    self.send_response(fake.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", fake.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                request["written"] = 0
                try:
                    for item in fake.items(body):
                        time.sleep(fake.chunk_delay)
                        data = item.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        request["written"] += 1
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client closed the connection
                    fake.abandoned.append(request)
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeProvider":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def items(self, body: dict[str, Any]) -> list[str]:
        """The answer to a request, as the wire format's streamed items."""
        offered = set(self.tool_names(body))
        if "generate_structured_output" in offered:
            return self.tool_calls([("call_route", "generate_structured_output", self.route)])
        turn = self.worker_turns
        self.worker_turns += 1
        if turn < len(self.tool_call_turns):
            return self.tool_calls(self.tool_call_turns[turn])
        if self.output is not None and "GenerateStructuredOutput" in offered:
            output = {"answer": "".join(self.answer), **self.output}
            return self.tool_calls([("call_out", "GenerateStructuredOutput", output)])
        return self.text(self.answer)

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def error_body(self, status: int) -> dict[str, Any]:
        raise NotImplementedError

    def tool_calls(self, calls: list[ToolCall]) -> list[str]:
        raise NotImplementedError

    def text(self, pieces: list[str]) -> list[str]:
        raise NotImplementedError


def _sse(payload: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


class FakeAnthropic(FakeProvider):
    """``POST /v1/messages`` with ``stream: true``: Anthropic's Messages events."""

    def __init__(self) -> None:
        super().__init__()
        self.usage_start: dict[str, Any] = {
            "input_tokens": 25,
            "output_tokens": 1,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        }
        self.output_tokens = 15

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [tool["name"] for tool in body.get("tools", [])]

    def error_body(self, status: int) -> dict[str, Any]:
        kind = "api_error" if status >= 500 else "invalid_request_error"
        return {"type": "error", "error": {"type": kind, "message": "upstream exploded"}}

    def _message(self, blocks: list[str], stop_reason: str) -> list[str]:
        message: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage_start,
        }
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        return [
            _sse({"type": "message_start", "message": message}, "message_start"),
            *blocks,
            _sse(
                {
                    "type": "message_delta",
                    "delta": delta,
                    "usage": {"output_tokens": self.output_tokens},
                },
                "message_delta",
            ),
            _sse({"type": "message_stop"}, "message_stop"),
        ]

    def tool_calls(self, calls: list[ToolCall]) -> list[str]:
        blocks = []
        for index, (call_id, name, arguments) in enumerate(calls):
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            blocks.append(
                _sse(
                    {"type": "content_block_start", "index": index, "content_block": start},
                    "content_block_start",
                )
            )
            text = json.dumps(arguments)
            for piece in [text[i : i + 16] for i in range(0, len(text), 16)]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                blocks.append(
                    _sse(
                        {"type": "content_block_delta", "index": index, "delta": delta},
                        "content_block_delta",
                    )
                )
            blocks.append(
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            )
        return self._message(blocks, "tool_use")

    def text(self, pieces: list[str]) -> list[str]:
        start = {"type": "content_block_start", "index": 0}
        text_block = {"type": "text", "text": ""}
        blocks = [_sse({**start, "content_block": text_block}, "content_block_start")]
        for piece in pieces:
            delta = {"type": "text_delta", "text": piece}
            blocks.append(
                _sse(
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                    "content_block_delta",
                )
            )
        blocks.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        return self._message(blocks, "end_turn")


class FakeGemini(FakeProvider):
    """``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``: ``GenerateContentResponse``
    chunks, each with the call's ``usageMetadata`` so far."""

    def __init__(self) -> None:
        super().__init__()
        self.usage: dict[str, Any] = {
            "promptTokenCount": 120,
            "candidatesTokenCount": 10,
            "thoughtsTokenCount": 6,
            "cachedContentTokenCount": 100,
            "totalTokenCount": 136,
        }

    def error_body(self, status: int) -> dict[str, Any]:
        state = "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"
        return {"error": {"code": status, "message": "upstream exploded", "status": state}}

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [
            declaration["name"]
            for tool in body.get("tools", [])
            for declaration in tool.get("functionDeclarations", [])
        ]

    def _chunks(self, parts: list[dict[str, Any]]) -> list[str]:
        chunks = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            chunk: dict[str, Any] = {"candidates": [candidate], "responseId": "resp-fake"}
            chunk["modelVersion"] = "gemini-fake"
            if last:
                candidate["finishReason"] = "STOP"
                chunk["usageMetadata"] = self.usage
            else:
                chunk["usageMetadata"] = {"promptTokenCount": self.usage["promptTokenCount"]}
            chunks.append(_sse(chunk))
        return chunks

    def tool_calls(self, calls: list[ToolCall]) -> list[str]:
        return self._chunks(
            [
                {"functionCall": {"id": call_id, "name": name, "args": arguments}}
                for call_id, name, arguments in calls
            ]
        )

    def text(self, pieces: list[str]) -> list[str]:
        return self._chunks([{"text": piece} for piece in pieces])


class FakeOllama(FakeProvider):
    """``POST /api/chat``: newline-delimited JSON, the last line ``done`` with the counts."""

    content_type = "application/x-ndjson"

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, Any] = {"prompt_eval_count": 42, "eval_count": 9}

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [tool["function"]["name"] for tool in body.get("tools", [])]

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": "upstream exploded"}

    def _line(self, message: dict[str, Any], done: bool) -> str:
        line = {
            "model": "llama-fake",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "", **message},
            "done": done,
        }
        if done:
            line.update(done_reason="stop", total_duration=1000, **self.counts)
        return json.dumps(line) + "\n"

    def tool_calls(self, calls: list[ToolCall]) -> list[str]:
        tool_calls = [{"function": {"name": name, "arguments": args}} for _, name, args in calls]
        return [self._line({"tool_calls": tool_calls}, False), self._line({}, True)]

    def text(self, pieces: list[str]) -> list[str]:
        return [*(self._line({"content": piece}, False) for piece in pieces), self._line({}, True)]
