"""The providers' client (agent_runs/runtime/provider_transport.py): a provider that writes
its headers and its body in two writes, without TCP_NODELAY, costs no delayed-ACK stall on a
kept-alive connection."""

import asyncio
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import pytest

from agent_runs.runtime.provider_transport import provider_session

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "TCP_QUICKACK"), reason="delayed ACKs are tuned on Linux only"
)


class TwoWrites(BaseHTTPRequestHandler):
    """Headers in one write, the body in another, Nagle left on: as some model servers do."""

    protocol_version = "HTTP/1.1"
    peers: set[tuple[str, int]] = set()  # the connections calls came on

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        TwoWrites.peers.add(self.client_address)
        body = b"data: " + b"x" * 2000 + b"\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def two_writes_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TwoWrites)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def call_times(url: str, *, tuned: bool) -> list[float]:
    times = []
    session = provider_session(limit=4) if tuned else aiohttp.ClientSession()
    async with session:
        for _ in range(6):
            started = time.perf_counter()
            async with session.post(url, json={}) as response:
                assert response.status == 200 and len(await response.read()) == 2008
            times.append(time.perf_counter() - started)
    return times[1:]  # kept-alive calls only


def test_kept_alive_calls_do_not_wait_for_a_delayed_ack(two_writes_server):
    TwoWrites.peers.clear()
    tuned = asyncio.run(call_times(two_writes_server, tuned=True))
    assert len(TwoWrites.peers) == 1  # the six calls took turns on one kept-alive connection
    plain = asyncio.run(call_times(two_writes_server, tuned=False))
    # Linux delays an ACK by 40 ms: each plain call waits for it, a tuned one does not.
    assert statistics.median(plain) > 0.030
    assert statistics.median(tuned) < 0.020
