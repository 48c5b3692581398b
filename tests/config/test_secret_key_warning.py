"""The development key's warning (config/settings/base.py): once a start, not once per process
the start spawns (a quick start runs daphne and a worker besides itself)."""

import os
import subprocess
import sys

from django.conf import settings

WARNING = "WARNING: DJANGO_SECRET_KEY is not set; using an insecure development key."


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` in debug mode without a secret key, as a fresh shell starts it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SECRET_KEY", "DJANGO_INSECURE_KEY_WARNED"}
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env={**env, "DJANGO_DEBUG": "true"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_a_process_warns_of_the_development_key_once() -> None:
    assert manage("check").stderr.count(WARNING) == 1


def test_the_processes_a_start_spawns_do_not_warn_again() -> None:
    spawn = "import subprocess, sys; subprocess.run([sys.executable, 'manage.py', 'check'])"

    started = manage("shell", "-c", spawn)

    assert "System check identified no issues" in started.stdout
    assert started.stderr.count(WARNING) == 1
