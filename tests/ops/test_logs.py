"""Log lines: JSON (LOG_FORMAT=json, production's default) or text (development's), and every
line of a run names its run and thread (docs/operations.md, "Logs")."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from agent_runs.models import Run
from tests.conftest import DEMO, post_run, run_input, service_env, stop_process, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def worker_with_log(log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", settings.AGENT_RUNS_QUEUE],
            cwd=settings.BASE_DIR,
            env=service_env(REDIS_URL=settings.REDIS_URL, **DEMO, **env),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def run_one(alice: Any, log: Path, **env: str) -> tuple[dict[str, Any], list[str]]:
    worker = worker_with_log(log, **env)
    try:
        body = run_input()
        assert post_run(alice, body).status_code == 202
        wait_for(
            lambda: Run.objects.filter(run_id=body["runId"], status="completed").exists(),
            seconds=60,
        )
        wait_for(lambda: "completed after" in log.read_text(), seconds=10)
    finally:
        stop_process(worker)
    return body, [line for line in log.read_text().splitlines() if line.strip()]


def test_a_worker_s_json_lines_name_the_run_and_thread(
    alice: Any, redis_queue: Any, tmp_path: Path
) -> None:
    body, lines = run_one(alice, tmp_path / "worker.log", LOG_FORMAT="json")
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    of_run = [record for record in records if record.get("run_id") == body["runId"]]
    assert len(of_run) >= 2, lines
    assert all(record["thread_id"] == body["threadId"] for record in of_run)
    assert any(record["message"].endswith(": claimed") for record in of_run)
    assert any(" completed after " in record["message"] for record in of_run)
    # and lines outside a run carry no run
    outside = [record for record in records if "run_id" not in record]
    assert outside and all("thread_id" not in record for record in outside)


def test_a_worker_s_text_lines_name_the_run_and_thread(
    alice: Any, redis_queue: Any, tmp_path: Path
) -> None:
    body, lines = run_one(alice, tmp_path / "worker.log", LOG_FORMAT="text")
    assert not any(line.startswith("{") for line in lines)
    named = f"run_id={body['runId']} thread_id={body['threadId']}"
    of_run = [line for line in lines if line.endswith(named)]
    assert len(of_run) >= 2, lines
    assert any(": claimed " in line for line in of_run)


@pytest.mark.parametrize(("debug", "expected"), [("true", "text"), ("false", "json")])
def test_the_log_format_defaults_to_text_in_development_and_json_otherwise(
    debug: str, expected: str
) -> None:
    env = {**service_env(), "DJANGO_DEBUG": debug}
    env.pop("LOG_FORMAT", None)
    printed = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.LOG_FORMAT)"],
        cwd=settings.BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        check=True,
    )
    assert printed.stdout.decode().strip() == expected


def test_an_unknown_log_format_stops_the_start() -> None:
    failed = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.LOG_FORMAT"],
        cwd=settings.BASE_DIR,
        env={**service_env(LOG_FORMAT="xml"), "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
    )
    assert failed.returncode != 0
    assert b"LOG_FORMAT must be json or text" in failed.stderr
