"""Who sees the console (docs/console.md, "Signing in"): a signed-in user; an anonymous visitor
is sent to the sign-in page, except in development (DEBUG) from this machine, where the demo
user is signed in and the page says so."""

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

NOTICE = "Development mode: signed in as the demo user, local addresses only."


def test_an_anonymous_visitor_is_sent_to_the_sign_in_page(settings: Any) -> None:
    settings.DEBUG = False
    response = Client(REMOTE_ADDR="127.0.0.1").get("/console/")
    assert response.status_code == 302
    assert response["Location"] == "/console/login/?next=/console/"
    assert not get_user_model().objects.filter(username=settings.CONSOLE_DEMO_USERNAME).exists()


def test_in_development_a_local_visitor_is_signed_in_as_the_demo_user(settings: Any) -> None:
    settings.DEBUG = True
    client = Client(REMOTE_ADDR="127.0.0.1")
    response = client.get("/console/")
    assert response.status_code == 200
    assert NOTICE in response.content.decode()
    demo = get_user_model().objects.get(username=settings.CONSOLE_DEMO_USERNAME)
    assert not demo.has_usable_password()
    assert response.wsgi_request.user == demo
    # The session holds: the next visit is the same user, with the notice still shown.
    again = client.get("/console/")
    assert again.status_code == 200 and NOTICE in again.content.decode()


def test_the_demo_login_takes_the_ipv6_loopback_too(settings: Any) -> None:
    settings.DEBUG = True
    response = Client(REMOTE_ADDR="::1").get("/console/")
    assert response.status_code == 200
    assert response.wsgi_request.user.get_username() == settings.CONSOLE_DEMO_USERNAME


@pytest.mark.parametrize(
    "client_options",
    [
        {"REMOTE_ADDR": "10.1.2.3"},
        {"REMOTE_ADDR": "192.168.1.20"},
        # A proxy on this machine forwarding someone else's request.
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.7"},
    ],
)
def test_the_demo_login_never_serves_another_address(
    settings: Any, client_options: dict[str, Any]
) -> None:
    settings.DEBUG = True
    response = Client(**client_options).get("/console/")
    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")
    assert not get_user_model().objects.filter(username=settings.CONSOLE_DEMO_USERNAME).exists()


def test_a_signed_in_user_sees_the_page_without_the_notice(settings: Any) -> None:
    settings.DEBUG = True
    alice = get_user_model().objects.create_user(username="alice", password="a long passphrase")
    client = Client(REMOTE_ADDR="127.0.0.1")
    client.force_login(alice)
    response = client.get("/console/")
    body = response.content.decode()
    assert response.status_code == 200
    assert NOTICE not in body
    assert "Signed in as <strong>alice</strong>" in body
    # The page's script is a module of this service's own static files, and the page carries
    # the CSRF token its API calls send.
    assert '<script type="module" src="/static/console/console.js">' in body
    assert 'data-csrf="' in body and "csrftoken" in response.cookies


def test_a_user_signs_in_with_the_form_and_out_with_the_button(settings: Any) -> None:
    settings.DEBUG = False
    get_user_model().objects.create_user(username="alice", password="a long passphrase")
    client = Client(REMOTE_ADDR="10.1.2.3")
    page = client.get("/console/login/?next=/console/")
    assert page.status_code == 200
    assert 'autocomplete="current-password"' in page.content.decode()

    wrong = client.post("/console/login/", {"username": "alice", "password": "nope"})
    assert wrong.status_code == 200
    assert 'role="alert"' in wrong.content.decode()

    signed_in = client.post(
        "/console/login/",
        {"username": "alice", "password": "a long passphrase", "next": "/console/"},
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/console/"
    assert client.get("/console/").status_code == 200

    signed_out = client.post("/console/logout/")
    assert signed_out.status_code == 302 and signed_out["Location"] == "/console/login/"
    assert client.get("/console/").status_code == 302


def test_the_demo_user_cannot_sign_in_with_a_password(settings: Any) -> None:
    settings.DEBUG = True
    Client(REMOTE_ADDR="127.0.0.1").get("/console/")  # creates the demo user
    response = Client(REMOTE_ADDR="10.1.2.3").post(
        "/console/login/", {"username": settings.CONSOLE_DEMO_USERNAME, "password": ""}
    )
    assert response.status_code == 200  # the form again, not a redirect into the console
    assert "_auth_user_id" not in response.wsgi_request.session


def test_the_pages_csrf_token_lets_its_api_calls_through(settings: Any) -> None:
    """The demo login rotates the CSRF token; the page carries the new one, which the API's
    session authentication takes (a POST without it is refused)."""
    settings.DEBUG = True
    client = Client(REMOTE_ADDR="127.0.0.1", enforce_csrf_checks=True)
    body = client.get("/console/").content.decode()
    token = re.search(r'data-csrf="([^"]+)"', body)
    assert token is not None

    refused = client.post("/api/v1/agent/attachments")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    # With the page's token: past CSRF, to the endpoint's own answer (no file sent).
    answered = client.post("/api/v1/agent/attachments", HTTP_X_CSRFTOKEN=token.group(1))
    assert answered.status_code == 400
