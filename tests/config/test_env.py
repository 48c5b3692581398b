import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list


def test_env_bool_reads_the_usual_spellings(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", True) is False


def test_env_bool_refuses_a_value_it_cannot_read(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG", False)


def test_env_int_refuses_a_non_number_and_a_value_below_its_minimum(monkeypatch):
    monkeypatch.setenv("COUNT", "ten")
    with pytest.raises(ImproperlyConfigured, match="COUNT must be an integer"):
        env_int("COUNT", 1)
    monkeypatch.setenv("COUNT", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("COUNT", 5, minimum=1)


def test_env_int_and_env_list_fall_back_to_their_defaults(monkeypatch):
    monkeypatch.delenv("COUNT", raising=False)
    monkeypatch.setenv("HOSTS", " a.example.com, ,b.example.com ")
    assert env_int("COUNT", 7) == 7
    assert env_list("HOSTS", []) == ["a.example.com", "b.example.com"]


def test_the_connection_pool_keeps_the_options_of_database_url():
    # sslmode, sslrootcert, application_name ... in DATABASE_URL's query reach every
    # connection: Django's pooled ones and the worker's event-writing one alike.
    url = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable&application_name=probe"
    script = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "from agent_runs.events.writer import _connection_kwargs\n"
        "params = _connection_kwargs()\n"
        "pooled = 'pool' in connection.settings_dict['OPTIONS']\n"
        "print(params['sslmode'], params['application_name'], pooled)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert result.stdout.split() == ["disable", "probe", "True"]
