"""A loopback HTTP server speaking the OpenAI chat-completions wire format, so the real
provider client runs in tests (the model is faked only at the network boundary)."""

import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    def __init__(self, port: int = 0) -> None:
        self.answer = ["Hello", " from", " the", " fake", " model."]
        self.status = 200
        self.delay = 0.0  # seconds before answering
        self.chunk_delay = 0.0  # seconds before each streamed chunk (a slowly streaming answer)
        self.reasoning: list[str] = []  # DeepSeek / Qwen "reasoning_content" deltas
        # A plain answer breaks off after its reasoning with a chunk that is not JSON (a
        # provider failing mid-stream).
        self.broken_after_reasoning = False
        # Tool calls to answer with, one list per request, before the plain answer:
        # [(call id, tool name, JSON arguments), ...]
        self.tool_call_turns: list[list[tuple[str, str, str]]] = []
        self.usage: dict[str, Any] = {
            "prompt_tokens": 11,
            "completion_tokens": 5,
            "total_tokens": 16,
        }
        # The worker's structured output (AgentScope's GenerateStructuredOutput tool), given
        # when the request offers that tool: the answer above, joined, plus these fields.
        # None: answer in plain text instead, as a model that ignores the tool would.
        self.output: dict[str, Any] | None = {"result_type": "unknown", "status": "success"}
        # The router's decision, for requests offering generate_structured_output.
        self.route: dict[str, Any] = {"route": "use_tools", "tools": []}
        # Requests whose messages mention this text are answered 500, the others as usual
        # (one run's provider failing among many).
        self.failing_text: str | None = None
        self.requests: list[dict[str, Any]] = []
        # The requests whose client closed the connection before the answer (its delay) or
        # midway (each request counts the chunks ``written``).
        self.abandoned: list[dict[str, Any]] = []
        self.worker_turns = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            request_made: dict[str, Any]  # the request being answered

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = {"path": self.path, "headers": dict(self.headers), "body": body}
                fake.requests.append(request)
                if not self._wait(fake.delay):
                    fake.abandoned.append(request)
                    return
                failing = fake.failing_text is not None and fake.failing_text in json.dumps(
                    body.get("messages", [])
                )
                status = 500 if failing else fake.status
                if status != 200:
                    self._send_json(status, {"error": {"message": "upstream exploded"}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.request_made = request
                request["written"] = 0
                try:
                    self._answer(body)
                except OSError:  # the client closed the connection midway
                    fake.abandoned.append(request)

            def _answer(self, body: dict[str, Any]) -> None:
                offered = {tool["function"]["name"] for tool in body.get("tools", [])}
                if "generate_structured_output" in offered:
                    route = json.dumps(fake.route)
                    self._tool_calls([("call_route", "generate_structured_output", route)])
                    return
                turn = fake.worker_turns
                fake.worker_turns += 1
                if turn < len(fake.tool_call_turns):
                    self._tool_calls(fake.tool_call_turns[turn])
                    return
                if fake.output is not None and "GenerateStructuredOutput" in offered:
                    for thought in fake.reasoning:
                        self._chunk({"role": "assistant", "reasoning_content": thought}, None)
                    output = json.dumps({"answer": "".join(fake.answer), **fake.output})
                    self._tool_calls([("call_out", "GenerateStructuredOutput", output)])
                    return
                for thought in fake.reasoning:
                    self._chunk({"role": "assistant", "reasoning_content": thought}, None)
                if fake.broken_after_reasoning:
                    self.wfile.write(b"data: {not json\n\n")
                    return
                for piece in fake.answer:
                    self._chunk({"role": "assistant", "content": piece}, None)
                self._chunk({}, "stop")
                self._data({**_envelope(), "choices": [], "usage": fake.usage})
                self.wfile.write(b"data: [DONE]\n\n")

            def _wait(self, seconds: float) -> bool:
                """Wait ``seconds``; false when the client closed the connection meanwhile."""
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                    if not readable:
                        continue
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return False
                    except OSError:
                        return False
                    time.sleep(min(left, 0.05))  # a request sent ahead: not a close
                return True

            def _tool_calls(self, calls: list[tuple[str, str, str]]) -> None:
                for index, (call_id, name, arguments) in enumerate(calls):
                    start = {"index": index, "id": call_id, "type": "function"}
                    start["function"] = {"name": name, "arguments": ""}
                    self._chunk({"role": "assistant", "tool_calls": [start]}, None)
                    # Arguments arrive in pieces, as they do from a provider.
                    pieces = [arguments[i : i + 16] for i in range(0, len(arguments), 16)]
                    for piece in pieces or [""]:
                        call = {"index": index, "function": {"arguments": piece}}
                        self._chunk({"tool_calls": [call]}, None)
                self._chunk({}, "tool_calls")
                self._data({**_envelope(), "choices": [], "usage": fake.usage})
                self.wfile.write(b"data: [DONE]\n\n")

            def _chunk(self, delta: dict[str, Any], finish: str | None) -> None:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                self._data({**_envelope(), "choices": [choice]})

            def _data(self, payload: dict[str, Any]) -> None:
                time.sleep(fake.chunk_delay)
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()
                self.request_made["written"] += 1

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _envelope() -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def said(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's messages without the reminders AgentScope adds for the model."""
    return [
        message
        for message in messages
        if not (
            isinstance(message.get("content"), list)
            and all(
                str(part.get("text", "")).startswith("<system-reminder>")
                for part in message["content"]
            )
        )
    ]


def backend_tool_names(request: dict[str, Any]) -> list[str]:
    """The tools a request offered, without AgentScope's structured-output tool."""
    names = (tool["function"]["name"] for tool in request["body"].get("tools", []))
    return sorted(name for name in names if name != "GenerateStructuredOutput")
