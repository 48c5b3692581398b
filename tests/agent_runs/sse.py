"""A small SSE client over real HTTP, for tests against daphne."""

import http.client
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode


@dataclass
class SseStream:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if "data" in frame]

    @property
    def types(self) -> list[str]:
        return [frame["event"] for frame in self.events]


def read_sse(
    port: int,
    thread_id: str,
    *,
    token: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    max_frames: int | None = None,
    stop_when: Callable[[dict[str, Any]], bool] | None = None,
    timeout: float = 10,
) -> SseStream:
    """GET the thread's event stream and read frames until the server ends it (or
    ``max_frames`` frames arrived, or a frame satisfies ``stop_when``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    path = f"/api/v1/agent/runs/{thread_id}/events"
    if query:
        path += "?" + urlencode(query)
    request_headers = dict(headers or {})
    if token:
        request_headers["Authorization"] = f"Bearer {token}"
    connection.request("GET", path, headers=request_headers)
    return _read(connection, max_frames=max_frames, stop_when=stop_when)


def post_sse(
    port: int,
    path: str,
    body: Any,
    *,
    token: str | None = None,
    query: dict[str, str] | None = None,
    max_frames: int | None = None,
    stop_when: Callable[[dict[str, Any]], bool] | None = None,
    timeout: float = 10,
) -> SseStream:
    """POST ``body`` as JSON asking for ``text/event-stream`` (what AG-UI's HttpAgent sends)
    and read the answer as ``read_sse`` does; the connection is closed when reading stops."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if query:
        path += "?" + urlencode(query)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    return _read(connection, max_frames=max_frames, stop_when=stop_when)


def _read(
    connection: http.client.HTTPConnection,
    *,
    max_frames: int | None,
    stop_when: Callable[[dict[str, Any]], bool] | None,
) -> SseStream:
    response = connection.getresponse()
    stream = SseStream(status=response.status, headers=dict(response.getheaders()))
    if response.status != 200:
        stream.body = response.read()
        connection.close()
        return stream
    frame: dict[str, Any] = {}
    while max_frames is None or len(stream.frames) < max_frames:
        line = response.readline()
        if not line:
            break
        stream.body += line
        text = line.decode().rstrip("\n")
        if text == "":
            if frame:
                stream.frames.append(frame)
                if stop_when is not None and stop_when(frame):
                    break
            frame = {}
            continue
        name, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "":
            frame["comment"] = value
        elif name == "data":
            frame["data"] = json.loads(value)
        else:
            frame[name] = value
    connection.close()
    return stream
