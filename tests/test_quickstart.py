"""The README's first command: the quick start (SQLite, an embedded Redis, the demo model)
serves runs end to end, its worker writing events from its reply's loop on SQLite, two runs
of one thread one after the other; its API reference pages, with their scripts; and what it
prints works as printed: the demo user's token, and the curl, run by a shell, streams a run
to its end."""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tests.agent_runs.sse import read_sse
from tests.conftest import free_port, wait_for, wait_for_port

pytestmark = pytest.mark.integration

TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def http_get(port: int, path: str | bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path if isinstance(path, str) else path.decode())
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_quick_start_runs_two_tool_runs_of_one_thread_to_their_end(tmp_path: Path):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY"}
    }
    env.update(DJANGO_DEBUG="true", LOCAL_DATA_DIR=str(tmp_path))
    port = free_port()
    manage = [sys.executable, "manage.py"]
    printed = tmp_path / "quickstart.out"
    with printed.open("wb") as out:
        service = subprocess.Popen(
            [*manage, "quickstart", "--port", str(port)],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
        )
    try:
        wait_for_port(port, service)
        wait_for(lambda: "Ctrl-C" in printed.read_text(), seconds=60)
        lines = printed.read_text().splitlines()
        curl = next(line.strip() for line in lines if line.strip().startswith("curl "))
        printed_token = next(line for line in lines if "API token of" in line).split()[-1]
        tried = subprocess.run(
            ["bash", "-c", curl], capture_output=True, text=True, check=True, timeout=60
        )
        token = subprocess.run(
            [*manage, "create_api_token", "alice"],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()[-1]
        thread_id = str(uuid.uuid4())
        for run_id in ("run-1", "run-2"):
            body = {
                "threadId": thread_id,
                "runId": run_id,
                "messages": [
                    {"id": f"m-{run_id}", "role": "user", "content": "/tool calendar_list {}"}
                ],
                "forwardedProps": {"runtime_mode": "chat"},
            }
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request(
                "POST",
                "/api/v1/agent/runs",
                body=json.dumps(body),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            assert connection.getresponse().status == 202
            connection.close()

        stream = read_sse(
            port,
            thread_id,
            token=token,
            query={"lastEventId": "0"},
            stop_when=lambda frame: (
                frame.get("event") in TERMINAL and frame["data"]["runId"] == "run-2"
            ),
            timeout=60,
        )
        console = http_get(port, "/console/")
        docs = {path: http_get(port, path) for path in ("/api/docs/", "/api/redoc/")}
        schema = http_get(port, "/api/schema/?format=json")
        assets = {
            src: http_get(port, src)[0]
            for _, page in docs.values()
            for src in re.findall(rb'(?:src|href)="([^"]+)"', page)
        }
    finally:
        service.send_signal(signal.SIGINT)
        try:
            service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()

    # The printed curl streamed a whole run with the printed token (no file to write first).
    assert printed_token in curl
    frames = [line.removeprefix("event: ") for line in tried.stdout.splitlines()]
    assert frames.count("RUN_STARTED") == 1
    assert "RUN_FINISHED" in frames and "(demo model) You said" in tried.stdout
    assert any(f"http://127.0.0.1:{port}/console/" in line for line in lines)
    # The console's URL, opened from this machine, signs in the demo user and says so.
    assert console[0] == 200 and b"signed in as the demo user" in console[1]
    # The API reference works in the quick start, offline: its scripts are served here.
    assert [status for status, _ in docs.values()] == [200, 200]
    assert schema[0] == 200 and json.loads(schema[1])["paths"]
    assert assets and all(src.startswith(b"/static/") for src in assets)
    assert set(assets.values()) == {200}
    ends = [(e["data"]["runId"], e["event"]) for e in stream.events if e["event"] in TERMINAL]
    assert ends == [("run-1", "RUN_FINISHED"), ("run-2", "RUN_FINISHED")]
    assert stream.types.count("TOOL_CALL_RESULT") == 2
    assert [e["data"]["runId"] for e in stream.events if e["event"] == "RUN_STARTED"] == [
        "run-1",
        "run-2",
    ]
