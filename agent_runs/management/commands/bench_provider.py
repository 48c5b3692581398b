"""Benchmark aid: a loopback OpenAI-compatible chat-completions server that answers at once,
streaming one chunk per token, as DeepSeek, DashScope and OpenAI do (docs/benchmarks.md,
"Per-token runs"). Point a worker at it (``AGENT_WORKER_MODEL=deepseek/deepseek-chat``,
``DEEPSEEK_API_KEY=anything``, ``DEEPSEEK_BASE_URL=http://127.0.0.1:<port>/v1``) and the real
provider path runs: the ``openai`` SDK, AgentScope's stream parsing, every chunk's events.

What it answers, by what the request offers:
- a structured-output tool (the router's and the worker's): a call of it, its JSON arguments
  streamed a token per chunk; a router schema gets ``{"route": "answer", "tools": []}``;
- the memory stage's tools: one short text;
- anything else: text, a token per chunk.
``tokens=N`` in the conversation sets N (default 100). Every stream ends with usage.
"""

import json
import re
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

_TOKENS = re.compile(r"tokens=(\d+)")
_MAX_TOKENS = 100_000
_USAGE = {"prompt_tokens": 120, "completion_tokens": 100, "total_tokens": 220}


class Command(BaseCommand):
    help = "Serve a loopback OpenAI-compatible model that streams one chunk per token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=9111)

    def handle(self, *args: Any, **options: Any) -> None:
        server = provider_server(options["port"])
        self.stdout.write(f"streaming one chunk per token on http://127.0.0.1:{options['port']}/v1")
        server.serve_forever()


def provider_server(port: int) -> ThreadingHTTPServer:
    """The loopback provider, bound to ``port`` on 127.0.0.1 (0: any free port)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    return server


def answer_chunks(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream's chunks (``choices[0].delta`` and finish) for one chat request."""
    conversation = json.dumps(request.get("messages", []))
    found = _TOKENS.search(conversation)
    count = min(int(found.group(1)), _MAX_TOKENS) if found else 100
    tokens = [f"{' ' if index else ''}word{index}" for index in range(count)]
    tools = {
        tool.get("function", tool).get("name", ""): tool.get("function", tool)
        for tool in request.get("tools") or []
    }
    if any(name.startswith("memory_") for name in tools):
        return _text(["Nothing", " to", " remember."])
    structured = next((name for name in tools if "structured" in name.lower()), None)
    if structured is None:
        return _text(tokens)
    properties = tools[structured].get("parameters", {}).get("properties", {})
    if "route" in properties:
        pieces = [json.dumps({"route": "answer", "tools": []})]
    else:
        pieces = [
            '{"answer": "',
            *tokens,
            '", "key_points": [], "result_type": "unknown", "suggested_actions": [], '
            '"status": "success"}',
        ]
    return _tool_call(structured, pieces)


def _tool_call(name: str, pieces: list[str]) -> list[dict[str, Any]]:
    """A call of tool ``name``, its arguments streamed in ``pieces``."""
    call = {"index": 0, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "function"}
    return [
        {"delta": {"role": "assistant", "content": ""}},
        {"delta": {"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]}},
        *(
            {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}}
            for piece in pieces
        ),
        {"delta": {}, "finish_reason": "tool_calls"},
    ]


def _text(pieces: list[str]) -> list[dict[str, Any]]:
    return [
        {"delta": {"role": "assistant", "content": ""}},
        *({"delta": {"content": piece}} for piece in pieces),
        {"delta": {}, "finish_reason": "stop"},
    ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.get("model", "bench"),
        }
        frames = []
        for chunk in answer_chunks(request):
            choice = {
                "index": 0,
                "delta": chunk["delta"],
                "finish_reason": chunk.get("finish_reason"),
            }
            body = {**base, "choices": [choice]}
            if choice["finish_reason"]:
                body["usage"] = _USAGE
            frames.append(b"data: " + json.dumps(body).encode() + b"\n\n")
        frames.append(b"data: [DONE]\n\n")
        payload = b"".join(frames)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
