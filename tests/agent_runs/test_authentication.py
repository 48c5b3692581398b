"""Bearer tokens are remembered per process for ``AGENT_API_TOKEN_CACHE_SECONDS``: a token
deleted, or a user deactivated, stops working within that time; ``last_used_at`` is still
written at most every five minutes."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent_runs.models import ApiToken

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
