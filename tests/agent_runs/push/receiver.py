"""A push notification receiver on loopback that checks each request's signature, as a
client's webhook would (docs/push.md, "Verifying a delivery")."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_runs.push.signing import push_signature_verify


@dataclass
class Received:
    headers: dict[str, str]
    body: Any
    signed: bool
    raw: bytes = b""


@dataclass
class PushReceiver:
    """Answers ``statuses`` in turn (then 200), with ``error_body`` on a failure; with
    ``fail_each``, each delivery's (``X-Push-Delivery``) first that many attempts fail (503)."""

    secret: str = ""
    statuses: list[int] = field(default_factory=list)
    error_body: bytes = b"receiver says no"
    redirect_to: str = ""
    delay: float = 0.0
    fail_each: int = 0
    received: list[Received] = field(default_factory=list)

    def __enter__(self) -> "PushReceiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(receiver.delay)
                signed = push_signature_verify(
                    header=self.headers.get("X-Push-Signature", ""),
                    body=raw,
                    secret=receiver.secret,
                )
                headers = {key.lower(): value for key, value in self.headers.items()}
                receiver.received.append(Received(headers, json.loads(raw), signed, raw))
                key = headers.get("x-push-delivery", "")
                seen = sum(1 for r in receiver.received if r.headers.get("x-push-delivery") == key)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if seen <= receiver.fail_each:
                    status = 503
                body = b"" if status < 300 else receiver.error_body
                self.send_response(status)
                if receiver.redirect_to:
                    self.send_header("Location", receiver.redirect_to)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/task"
