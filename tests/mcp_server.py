"""A real MCP tool server on loopback: the ``mcp`` package's own server, over streamable HTTP
(``/mcp``) and SSE (``/sse``), under uvicorn on a thread of its own. It records each tool
call, the headers each request came with, the JSON-RPC method of each message posted to it,
and the most tool calls it had under way at once."""

import asyncio
import json
import threading
import time
from typing import Any

import uvicorn
from mcp.server import MCPServer
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from tests.conftest import free_port


class LoopbackMcpServer:
    """Tools: ``lookup_order`` (an order's status), ``cancel_order`` (says it cancelled it),
    and ``slow_report`` (answers after ``slow_seconds``)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []
        self.methods: list[str] = []
        self.slow_seconds = 30.0
        self.running = 0
        self.most_running = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def _mcp(self) -> MCPServer:
        server: MCPServer = MCPServer("orders")
        calls = self.calls

        @server.tool()
        def lookup_order(order_id: str) -> str:
            """Look up an order's status by its id."""
            calls.append(("lookup_order", {"order_id": order_id}))
            return f"Order {order_id}: shipped on 2026-03-02"

        @server.tool()
        def cancel_order(order_id: str) -> str:
            """Cancel an order."""
            calls.append(("cancel_order", {"order_id": order_id}))
            return f"Order {order_id} cancelled"

        @server.tool()
        async def slow_report() -> str:
            """A report that takes a long time."""
            calls.append(("slow_report", {}))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            try:
                await asyncio.sleep(self.slow_seconds)
            finally:
                self.running -= 1
            return "the report"

        return server

    def _app(self) -> Any:
        streamable = self._mcp().streamable_http_app()
        sse = self._mcp().sse_app()

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                self.headers.append(
                    {key.decode(): value.decode() for key, value in scope["headers"]}
                )
                if scope["method"] == "POST":
                    receive = await self._recording(receive)
            target = sse if scope.get("path", "").startswith(("/sse", "/messages")) else streamable
            await target(scope, receive, send)

        # The streamable app's lifespan runs its session manager.
        return Starlette(routes=[Mount("/", app=app)], lifespan=streamable.router.lifespan_context)

    async def _recording(self, receive: Receive) -> Receive:
        """Read the posted body, note its JSON-RPC method, and give it to the app as sent."""
        messages = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if isinstance(payload, dict) and "method" in payload:
            self.methods.append(payload["method"])

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        return replay

    def __enter__(self) -> "LoopbackMcpServer":
        config = uvicorn.Config(self._app(), host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            assert time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=10)
