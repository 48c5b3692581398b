"""A URL no route matches is the API's JSON 404 under /api/ and /storage/."""

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/agent/threads/not-a-uuid",
        "/api/v1/agent/runs/not-a-uuid/events",
        "/api/v1/agent/nothing-here",
        "/storage/v1/object/elsewhere",
    ],
)
def test_an_unrouted_api_path_is_a_json_404(client, settings, path):
    settings.DEBUG = False  # in debug Django shows its own page instead

    response = client.get(path)

    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


@pytest.mark.django_db
def test_an_unrouted_page_elsewhere_keeps_django_s_404(client, settings):
    settings.DEBUG = False

    response = client.get("/no-such-page")

    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")
