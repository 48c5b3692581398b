"""/healthz says the process answers, and asks nothing of the database."""

import pytest
from django.test import Client

from agent_runs.models import WorkerBeat


def test_healthz_answers_without_the_database(client: Client) -> None:
    # No database marker: pytest-django refuses any query, so a 200 here asked for none.
    with pytest.raises(RuntimeError, match="Database access not allowed"):
        WorkerBeat.objects.count()
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


def test_healthz_answers_a_host_allowed_hosts_does_not_list(client: Client) -> None:
    # A kubelet asks the pod's address, not a public host name.
    response = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")
    assert response.status_code == 200
    assert client.get("/api/v1/agent/threads", HTTP_HOST="10.0.0.7:8000").status_code == 400
