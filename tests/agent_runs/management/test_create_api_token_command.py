from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from agent_runs.models import ApiToken
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db


def create_token(username: str) -> str:
    out = StringIO()
    call_command("create_api_token", username, stdout=out)
    return out.getvalue()


def test_it_creates_the_user_and_prints_only_the_token(redis_queue):
    output = create_token("carol")
    lines = output.splitlines()
    assert len(lines) == 1 and len(lines[0]) >= 40
    user = get_user_model().objects.get(username="carol")
    assert not user.has_usable_password()
    token = ApiToken.objects.get(user=user)
    assert token.key_hash == ApiToken.hash_key(lines[0])  # only the hash is stored
    assert lines[0] not in str(ApiToken.objects.values_list())


def test_a_second_token_for_the_same_user_is_new_and_both_work(redis_queue):
    first = create_token("carol").strip()
    second = create_token("carol").strip()
    assert first != second
    assert get_user_model().objects.filter(username="carol").count() == 1
    for token in (first, second):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert post_run(client, run_input()).status_code == 202
