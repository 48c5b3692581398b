"""The console's files as production serves them (``DJANGO_DEBUG=false``: what ``collectstatic``
gathered, served in front of Django by config/static.py): a browser loads the page's modules
one after another over one kept-alive connection, and every one must come."""

import http.client
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import service_env, start_daphne, stop_process

pytestmark = pytest.mark.integration

FILES = {
    "/static/console/console.js": "text/javascript",
    "/static/console/sse.js": "text/javascript",
    "/static/console/render.js": "text/javascript",
    "/static/console/approvals.js": "text/javascript",
    "/static/console/inbox.js": "text/javascript",
    "/static/console/spend.js": "text/javascript",
    "/static/console/console.css": "text/css",
}


def test_the_pages_files_come_over_one_kept_alive_connection(
    django_db_setup: Any, tmp_path: Path
) -> None:
    env = {"LOCAL_DATA_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=settings.BASE_DIR,
        env=service_env(REDIS_URL=settings.REDIS_URL, **env),
        check=True,
    )
    server, port = start_daphne(redis_url=settings.REDIS_URL, **env)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        answers = []
        for _ in range(3):
            for path in [*FILES, "/console/login/"]:
                connection.request("GET", path)
                response = connection.getresponse()
                body = response.read()
                answers.append((path, response.status, response.headers["Content-Type"], body))
        connection.close()
    finally:
        stop_process(server)

    assert [(path, status) for path, status, _, _ in answers] == [
        (path, 200) for _ in range(3) for path in [*FILES, "/console/login/"]
    ]
    for path, _, content_type, body in answers:
        if path in FILES:
            # A module script is refused by the browser unless it is served as JavaScript.
            assert content_type.startswith(FILES[path]), (path, content_type)
            assert body == (Path(settings.BASE_DIR) / "console" / path[1:]).read_bytes()
