"""A body over ``REQUEST_BODY_MAX_BYTES`` (or, to a route that takes no uploads, over the
largest JSON body) is refused before daphne reads it (config/daphne_requests.py), on its
``Content-Length`` or, chunked, once it passes the limit: a ``413`` in the endpoint's error
shape, and daphne's memory does not grow with the body."""

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from config.daphne_requests import JSON_BODY_MAX_BYTES
from tests.conftest import start_daphne, stop_process

LIMIT = 1024 * 1024
BODY = 64 * 1024 * 1024
MEGABYTE = b"x" * (1024 * 1024)


@pytest.fixture(scope="module")
def daphne(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[int, int]]:
    """daphne's port and process id."""
    server, port = start_daphne(redis_url=settings.REDIS_URL, REQUEST_BODY_MAX_BYTES=str(LIMIT))
    yield port, server.pid
    stop_process(server)


def memory_kb(pid: int) -> dict[str, int]:
    """The process's resident memory now (``VmRSS``) and at its peak (``VmHWM``), in kB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}


def connect(port: int, head: str) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(head.encode() + b"\r\n\r\n")
    return connection


def read_answer(connection: socket.socket, data: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the answer (its first bytes ``data``), read until the
    server closes."""
    while chunk := connection.recv(65536):
        data += chunk
    return read_answer_of(data)


def read_head(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_a_body_declared_over_the_limit_is_refused_before_it_is_read(daphne):
    port, pid = daphne
    before = memory_kb(pid)
    connection = connect(
        port,
        f"POST /openai/v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {BODY}",
    )

    # The answer comes with none of the body sent.
    answered = read_head(connection)
    # A client that sends it anyway has it read and dropped, and then the answer.
    for _ in range(BODY // len(MEGABYTE)):
        connection.sendall(MEGABYTE)
    status, headers, body = read_answer(connection, answered)
    connection.close()
    after = memory_kb(pid)

    assert answered.startswith(b"HTTP/1.1 413 ")
    assert status == 413 and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "payload_too_large" and str(LIMIT) in error["message"]
    assert after["VmHWM"] - before["VmHWM"] < 16 * 1024, (before, after)
    assert after["VmRSS"] - before["VmRSS"] < 16 * 1024, (before, after)


def test_a_chunked_body_is_refused_once_it_passes_the_limit(daphne):
    port, pid = daphne
    before = memory_kb(pid)
    connection = connect(
        port,
        "POST /ap/v1/agent/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked",
    )

    frame = f"{len(MEGABYTE):x}\r\n".encode() + MEGABYTE + b"\r\n"
    for _ in range(BODY // len(MEGABYTE)):
        connection.sendall(frame)
    connection.sendall(b"0\r\n\r\n")
    status, headers, body = read_answer(connection)
    connection.close()
    after = memory_kb(pid)

    assert after["VmHWM"] - before["VmHWM"] < 16 * 1024, (before, after)
    assert after["VmRSS"] - before["VmRSS"] < 16 * 1024, (before, after)
    assert status == 413 and headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "error": "Request Entity Too Large",
        "message": f"the request body exceeds the limit of {LIMIT} bytes",
    }


def test_a_body_within_the_limit_still_reaches_the_endpoint(daphne):
    port, _ = daphne
    body = b"{" + b" " * (LIMIT - 2) + b"}"
    connection = connect(
        port,
        f"POST /api/v1/agent/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}",
    )

    connection.sendall(body)
    status, _, answer = read_answer(connection)
    connection.close()

    assert status == 401, answer  # the endpoint's own answer: no credentials
    assert json.loads(answer) == {"detail": "Authentication credentials were not provided."}


@pytest.mark.parametrize(
    "path, content_type, expected",
    [
        ("/api/v1/agent/attachments", "application/json", {"detail": "<message>"}),
        ("/api/v1/agent/process", "application/json", {"error": {"code": "payload_too_large"}}),
        ("/api/tasks", "application/json", {"error": "Request Entity Too Large"}),
        ("/a2a", "application/json", {"jsonrpc": "2.0", "error": {"code": -32600}}),
        ("/admin/login/", "text/plain; charset=utf-8", None),
    ],
)
def test_each_endpoint_refuses_in_its_own_shape(daphne, path, content_type, expected):
    port, _ = daphne
    connection = connect(port, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {BODY}")

    answered = read_head(connection)
    connection.close()
    status, headers, body = read_answer_of(answered)

    assert status == 413 and headers["content-type"] == content_type
    message = f"the request body exceeds the limit of {LIMIT} bytes"
    if expected is None:
        assert body == message.encode()
    else:
        assert contains(json.loads(body), expected, message)


def read_answer_of(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (x.split(":", 1) for x in lines)}
    return int(status_line.split()[1]), headers, body


def contains(value: Any, expected: Any, message: str) -> bool:
    """Whether ``value`` holds each key of ``expected`` with its value, ``"<message>"`` standing
    for ``message``; a message is the refusal's, under whichever key the shape names it."""
    if isinstance(expected, dict):
        if not isinstance(value, dict):
            return False
        found = all(contains(value.get(key), item, message) for key, item in expected.items())
        return found and message in json.dumps(value)
    return bool(value == (message if expected == "<message>" else expected))


UPLOADS_LIMIT = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def daphne_taking_uploads(django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    """A daphne whose uploads may be larger than the largest JSON body: its port."""
    limit = str(UPLOADS_LIMIT)
    server, port = start_daphne(redis_url=settings.REDIS_URL, REQUEST_BODY_MAX_BYTES=limit)
    yield port
    stop_process(server)


def test_a_route_without_uploads_refuses_a_body_over_the_largest_json_one_unread(
    daphne_taking_uploads,
):
    size = 2 * JSON_BODY_MAX_BYTES  # within REQUEST_BODY_MAX_BYTES
    runs = connect(
        daphne_taking_uploads,
        f"POST /api/v1/agent/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {size}",
    )
    refused = read_head(runs)  # with none of the body sent
    runs.close()
    upload = connect(
        daphne_taking_uploads,
        f"POST /api/v1/agent/attachments HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {size}",
    )
    upload.sendall(b"x" * size)
    status, _, answer = read_answer(upload)
    upload.close()

    assert read_answer_of(refused)[0] == 413
    message = f"the request body exceeds the limit of {JSON_BODY_MAX_BYTES} bytes"
    assert json.loads(read_answer_of(refused)[2]) == {"detail": message}
    # The upload's route read it all and answered itself: no credentials.
    assert status == 401, answer
