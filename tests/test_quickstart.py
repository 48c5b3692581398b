"""The README's first command: the quick start (SQLite, an embedded Redis, the demo model)
serves runs end to end, its worker writing events from its reply's loop on SQLite, two runs
of one thread one after the other; its API reference pages, with their scripts; and what it
prints works as printed: the demo user's token, and the curl, run by a shell, streams a run
to its end. ``bash .ci/quickstart`` itself, in a copy of the checkout on a machine with no
package index: a restart installs nothing, a second start refuses and leaves the first
alone, the banner comes once /readyz passes, and Ctrl-C stops everything quietly."""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import Iterator
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


# Not copied: what a checkout gets by being used (its .venv and data folder, caches).
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".local", "node_modules", "__pycache__", "*_cache", ".hypothesis",
    "*.egg-info",
)  # fmt: skip


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of this checkout whose ``.venv`` is complete, as a first ``bash .ci/quickstart``
    leaves it: this .venv's packages (a .pth file) and the record of what it installed from
    (the quick start's copy of pyproject.toml). The quick start's own .venv is not touched."""
    root = tmp_path_factory.mktemp("checkout") / "main"
    shutil.copytree(settings.BASE_DIR, root, ignore=_NOT_COPIED)
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    ours = next(venv.glob("lib/python*/site-packages"))
    (ours / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copy(root / "pyproject.toml", venv / "quickstart-installed.toml")
    try:
        yield root
    finally:
        kill_processes_in(root)


def kill_processes_in(root: Path) -> None:
    """Kill what a failed test left running in the copy (a child in a session of its own
    outlives a killed quick start)."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(root):
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


# The service's own defaults, and the .venv and Python the copy's quick start picks itself.
_NOT_INHERITED = {
    "DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "LOCAL_DATA_DIR", "PYTHON", "VIRTUAL_ENV",
}  # fmt: skip


def offline_env() -> dict[str, str]:
    """The quick start's environment on a machine with no package index: any ``pip
    install`` fails."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _NOT_INHERITED and not key.startswith("PIP_")
    }
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_INDEX_URL="http://127.0.0.1:9/")
    return env


def quickstart(root: Path, port: int, printed: Path) -> subprocess.Popen[bytes]:
    """``bash .ci/quickstart`` as a terminal runs it: in a process group of its own (the
    terminal's foreground group, which Ctrl-C signals)."""
    with printed.open("wb") as out:
        return subprocess.Popen(
            ["bash", ".ci/quickstart", "--port", str(port)],
            cwd=root,
            env=offline_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_for_banner(service: subprocess.Popen[bytes], printed: Path) -> None:
    wait_for(lambda: "Ctrl-C" in printed.read_text() or service.poll() is not None, 180)
    assert service.poll() is None, printed.read_text()


def ctrl_c(service: subprocess.Popen[bytes], seconds: float = 20) -> None:
    """SIGINT to the quick start's process group, as a terminal's Ctrl-C."""
    os.killpg(service.pid, signal.SIGINT)
    try:
        service.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(service.pid, signal.SIGKILL)
        service.wait()
        raise


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_restart_with_a_complete_venv_needs_no_package_index(checkout: Path) -> None:
    shown = subprocess.run(
        ["bash", ".ci/quickstart", "--help"],
        cwd=checkout,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "--port" in shown.stdout and "pip" not in shown.stderr

    printed = checkout / "restart.out"
    service = quickstart(checkout, free_port(), printed)
    try:
        wait_for_banner(service, printed)
    finally:
        ctrl_c(service)
    assert "The service is running" in printed.read_text()


def test_the_banner_comes_once_readyz_passes(checkout: Path) -> None:
    port = free_port()
    printed = checkout / "banner.out"
    service = quickstart(checkout, port, printed)
    try:
        wait_for_banner(service, printed)
        status, body = http_get(port, "/readyz")
    finally:
        ctrl_c(service)
    assert status == 200, body


def test_a_second_quick_start_in_the_same_checkout_refuses_and_leaves_the_first_alone(
    checkout: Path,
) -> None:
    port = free_port()
    printed = checkout / "first.out"
    first = quickstart(checkout, port, printed)
    try:
        wait_for_banner(first, printed)
        curl = next(line.strip() for line in printed.read_text().splitlines() if "curl " in line)
        second = subprocess.run(
            ["bash", ".ci/quickstart", "--port", str(port)],  # its port is busy too
            cwd=checkout,
            env=offline_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        socket_kept = (checkout / ".local" / "redis.sock").exists()
        # The first one still queues and runs a run, and says it is ready.
        tried = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60)
        ready = http_get(port, "/readyz")
    finally:
        ctrl_c(first)

    assert second.returncode != 0
    assert "another quick start is running" in second.stderr
    assert "The service is running" not in second.stdout
    assert "embedded Redis" not in second.stdout  # it started nothing
    assert socket_kept
    assert "RUN_FINISHED" in tried.stdout, tried.stdout + tried.stderr
    assert ready[0] == 200, ready[1]


def test_ctrl_c_stops_every_process_in_a_few_seconds_without_a_traceback(
    checkout: Path,
) -> None:
    printed = checkout / "ctrl-c.out"
    service = quickstart(checkout, free_port(), printed)
    try:
        wait_for_banner(service, printed)
        started = children(service.pid)
    finally:
        start = time.monotonic()
        ctrl_c(service)
        stopped_in = time.monotonic() - start

    assert len(started) == 3  # redis-server, daphne, the worker
    assert not [pid for pid in started if running(pid)]
    assert service.returncode == 0
    assert stopped_in < 15
    output = printed.read_text()
    assert "Traceback" not in output, output
    assert output.rstrip().endswith("stopped")
