"""The admin's runs list in a real browser (Debian's Chromium through Playwright) at a laptop's
1280 px: a run's status and creation date show without scrolling sideways, whatever the
length of its runId (up to 128 characters) and its owner's name."""

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import sync_playwright

from agent_runs.models import Run, Thread
from tests.conftest import service_env, start_daphne, stop_process
from tests.console.conftest import CHROMIUM_ARGS, chromium_path

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery staple"
# The runIds the protocols make, and one a client chose at the longest allowed.
RUN_IDS = [
    f"task-run-{uuid.uuid4()}",
    f"response_{uuid.uuid4()}",
    f"resp_{uuid.uuid4().hex}",
    "a-client-chose-this-" + "x" * 108,
]


@pytest.fixture
def admin_url(transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """daphne, serving the admin's static files as collected, with a staff user and runs."""
    local = {"LOCAL_DATA_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=settings.BASE_DIR,
        env=service_env(REDIS_URL=settings.REDIS_URL, **local),
        check=True,
    )
    get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)
    owner = get_user_model().objects.create_user("a.very.long.username.of.someone@example.com")
    for index, run_id in enumerate(RUN_IDS):
        Run.objects.create(
            thread=Thread.objects.create(owner=owner),
            run_id=run_id,
            status=list(Run.Status)[index % len(Run.Status)],
            runtime_mode=Run.RuntimeMode.AUTOMATION,
            input={},
            input_sha256="0" * 64,
        )
    server, port = start_daphne(redis_url=settings.REDIS_URL, **local)
    try:
        yield f"http://127.0.0.1:{port}/admin/"
    finally:
        stop_process(server)


def test_status_and_created_show_without_scrolling_at_1280_px(admin_url: str) -> None:
    # No ORM call while Playwright's sync API runs its event loop in this thread.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{admin_url}login/?next=/admin/agent_runs/run/")
            page.fill("#id_username", "staff")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_selector("#result_list")
            layout: dict[str, Any] = page.evaluate(
                """() => ({
                    viewport: document.documentElement.clientWidth,
                    status: document.querySelector("th.column-status").getBoundingClientRect(),
                    created: document.querySelector("th.column-created_at")
                        .getBoundingClientRect(),
                    rows: document.querySelectorAll("#result_list tbody tr").length,
                    // The list scrolls sideways inside this box, beside the filters.
                    shown: document.querySelector(".results").getBoundingClientRect().right,
                })"""
            )
        finally:
            browser.close()

    assert layout["rows"] == len(RUN_IDS)
    assert layout["shown"] <= layout["viewport"], layout
    for column in ("status", "created"):
        assert 0 <= layout[column]["left"] < layout[column]["right"] <= layout["shown"], layout
