"""Push URLs are checked so the feature cannot be turned against the server's own network:
http(s) only, and no private, loopback, link-local or otherwise internal address unless
PUSH_ALLOW_PRIVATE_URLS is on (docs/push.md, "Push URLs")."""

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agent_runs.errors import PushUrlRefused
from agent_runs.models import PushConfig, Thread
from agent_runs.push.services import push_config_create, push_url_check

PRIVATE = (
    "push notification URL refused: the host is a private, loopback, link-local or reserved "
    "address (PUSH_ALLOW_PRIVATE_URLS is off)"
)


@pytest.fixture(autouse=True)
def private_refused(settings: Any) -> None:
    settings.PUSH_ALLOW_PRIVATE_URLS = False


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "https://192.168.1.10/hook",
        "http://169.254.169.254/latest/meta-data/",  # link-local: the cloud metadata service
        "http://100.64.0.1/",  # shared address space (carrier-grade NAT)
        "http://0.0.0.0/",
        "http://224.0.0.1/",  # multicast
        "http://240.0.0.1/",  # reserved
        "http://[::1]/",
        "http://[::]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",  # unique local
        "http://[ff02::1]/",  # multicast
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "http://[::ffff:10.0.0.1]/",
        "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.1/",
    ],
)
def test_it_refuses_internal_addresses(url):
    with pytest.raises(PushUrlRefused) as refused:
        push_url_check(url)
    assert str(refused.value) == PRIVATE
    assert (refused.value.code, refused.value.status) == ("push_url_refused", 400)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/hook", "only http and https URLs are allowed"),
        ("file:///etc/passwd", "only http and https URLs are allowed"),
        ("gopher://127.0.0.1:6379/_FLUSHALL", "only http and https URLs are allowed"),
        ("example.com/hook", "only http and https URLs are allowed"),
        ("http:///hook", "the URL has no host"),
        ("http://example.com:99999/", "the URL's port is not a valid port"),
        ("http://no-such-host.invalid/", "the host does not resolve"),
    ],
)
def test_it_refuses_what_is_not_an_http_url_it_can_reach(url, message):
    with pytest.raises(PushUrlRefused) as refused:
        push_url_check(url)
    assert str(refused.value) == f"push notification URL refused: {message}"


def test_it_accepts_a_public_address():
    assert push_url_check("https://93.184.215.14:8443/hook") == ["93.184.215.14"]
    assert push_url_check("http://[2606:4700::1111]/hook") == ["2606:4700::1111"]


def test_the_setting_allows_private_addresses(settings):
    settings.PUSH_ALLOW_PRIVATE_URLS = True
    assert push_url_check("http://127.0.0.1:9000/hook") == ["127.0.0.1"]
    with pytest.raises(PushUrlRefused):
        push_url_check("ftp://127.0.0.1/")  # still http(s) only


@pytest.mark.django_db
def test_a_refused_url_registers_no_config():
    alice = get_user_model().objects.create(username="alice")
    thread = Thread.objects.create(owner=alice)
    with pytest.raises(PushUrlRefused):
        push_config_create(
            thread=thread, protocol="a2a", task_ref="t", url="http://169.254.169.254/"
        )
    assert not PushConfig.objects.exists()
