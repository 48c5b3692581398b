"""Bearer tokens are remembered per process for ``AGENT_API_TOKEN_CACHE_SECONDS``: a token
deleted, or a user deactivated, stops working within that time; ``last_used_at`` is still
written at most every five minutes. And the caller is resolved once per request."""

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent_runs.models import ApiToken
from agent_runs.services import tokens
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db

THREADS = "/api/v1/agent/threads"


def test_a_deleted_token_stops_working_once_the_cache_lifetime_has_passed(alice, settings):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 0.5
    assert alice.get(THREADS).status_code == 200
    ApiToken.objects.filter(user__username="alice").delete()
    time.sleep(0.6)
    assert alice.get(THREADS).status_code == 401


def test_a_deactivated_user_s_token_stops_working_once_the_cache_lifetime_has_passed(
    alice, settings
):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 0.5
    assert alice.get(THREADS).status_code == 200
    get_user_model().objects.filter(username="alice").update(is_active=False)
    time.sleep(0.6)
    assert alice.get(THREADS).status_code == 401


def test_within_the_cache_lifetime_the_token_is_not_read_again(alice, settings):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 60
    assert alice.get(THREADS).status_code == 200
    # Deleted from the database, still remembered by this process: the documented window.
    ApiToken.objects.filter(user__username="alice").delete()
    assert alice.get(THREADS).status_code == 200


def test_with_no_cache_a_deleted_token_stops_working_at_once(alice, settings):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 0
    assert alice.get(THREADS).status_code == 200
    ApiToken.objects.filter(user__username="alice").delete()
    assert alice.get(THREADS).status_code == 401


def test_last_used_at_is_written_at_most_every_five_minutes(alice, settings):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 0  # each request reads the token
    token = ApiToken.objects.get(user__username="alice")
    assert token.last_used_at is None
    assert alice.get(THREADS).status_code == 200
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None
    assert alice.get(THREADS).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first_use  # not written again within five minutes
    long_ago = timezone.now() - timedelta(minutes=6)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=long_ago)
    assert alice.get(THREADS).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at > long_ago + timedelta(minutes=5)


def test_a_remembered_token_s_last_used_at_is_not_written_on_every_request(alice, settings):
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 60
    assert alice.get(THREADS).status_code == 200
    token = ApiToken.objects.get(user__username="alice")
    first_use = token.last_used_at
    assert first_use is not None
    assert alice.get(THREADS).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first_use


A2A_GET_TASK = {
    "jsonrpc": "2.0",
    "id": "get-1",
    "method": "tasks/get",
    "params": {"id": "00000000-0000-4000-8000-000000000000"},
}


def test_the_caller_is_resolved_once_per_request_on_every_protocol(
    alice, settings, monkeypatch, redis_queue
):
    """The token is looked up once per request, however many checks read the caller (the
    key's scopes, the view's ``request_user``, a protocol's own scope check)."""
    settings.AGENT_API_TOKEN_CACHE_SECONDS = 0  # each lookup reads the database
    lookups: list[str] = []
    load = tokens._token_load

    def counted(key_hash: str, now: float) -> Any:
        lookups.append(key_hash)
        return load(key_hash, now)

    monkeypatch.setattr(tokens, "_token_load", counted)
    body = run_input()
    requests = [
        lambda: alice.get(THREADS),
        lambda: post_run(alice, body),
        lambda: alice.get(f"{THREADS}/{body['threadId']}/runs"),
        lambda: alice.get("/api/v1/agent/keys"),
        lambda: alice.get("/api/tasks"),
        lambda: alice.get("/ap/v1/agent/tasks"),
        lambda: alice.get("/openai/v1/responses/resp_unknown"),
        lambda: alice.post("/a2a", A2A_GET_TASK, format="json"),
    ]
    for request in requests:
        lookups.clear()
        response = request()
        assert response.status_code < 500, response.content
        assert len(lookups) == 1, (response.wsgi_request.path, lookups)
