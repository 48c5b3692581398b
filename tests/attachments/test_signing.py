"""Signed URLs: issue, verify, parse (pure: no database)."""

import base64
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from attachments.errors import (
    ObjectPathInvalid,
    SignedUrlExpired,
    SignedUrlInvalid,
    SignedUrlTampered,
)
from attachments.signing import (
    BUCKET_PATTERN,
    MAX_PATH_LENGTH,
    MAX_TOKEN_LENGTH,
    PATH_PATTERN,
    TOKEN_PATTERN,
    object_ref_validate,
    parse_signed_url,
    signed_token_verify,
    signed_url_create,
    signed_url_verify,
)

BASE = "https://project.supabase.co/storage/v1/object/sign"


def _token(url: str) -> str:
    return url.split("?token=", 1)[1]


def _with_token(url: str, token: str) -> str:
    return url.split("?token=", 1)[0] + "?token=" + token


def test_it_issues_a_url_in_the_supabase_shape_on_the_public_base_url(settings: Any) -> None:
    settings.PUBLIC_BASE_URL = "https://agents.example.com"
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png")
    assert url.startswith(
        "https://agents.example.com/storage/v1/object/sign/agent-inputs/7/abc.png?token="
    )
    header, payload, _signature = _token(url).split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "HS256", "typ": "JWT"}
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["url"] == "agent-inputs/7/abc.png"
    assert claims["exp"] - claims["iat"] == settings.ATTACHMENT_SIGNED_URL_TTL_SECONDS


def test_it_verifies_its_own_url_and_says_when_the_grant_ends() -> None:
    now = timezone.now()
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png", expires_in=60, now=now)
    signed = signed_url_verify(url, now=now + timedelta(seconds=59))
    assert (signed.bucket, signed.path) == ("agent-inputs", "7/abc.png")
    assert int(signed.expires_at.timestamp()) == int(now.timestamp()) + 60


def test_a_url_issued_before_pyjwt_signed_them_still_verifies(settings: Any) -> None:
    # Written by the hand-rolled HS256 signer this module had before it used PyJWT: the token
    # format is the same standard JWT, so URLs already handed out keep working.
    settings.ATTACHMENT_SIGNING_SECRET = "s3cret"
    issued_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    url = (
        "http://127.0.0.1:8000/storage/v1/object/sign/agent-inputs/7/abc.png?token="
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
        "eyJ1cmwiOiJhZ2VudC1pbnB1dHMvNy9hYmMucG5nIiwiaWF0IjoxNzY3MzIzMDQ1LCJleHAiOjE3NjczMjY2NDV9."
        "YovRFYMvDyKXB0-OhZSMq0k6hRwj6U18Z_5qw50ha3E"
    )
    signed = signed_url_verify(url, now=issued_at + timedelta(seconds=10))
    assert (signed.bucket, signed.path) == ("agent-inputs", "7/abc.png")
    assert signed.expires_at == issued_at + timedelta(hours=1)
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    assert (
        signed_url_create(bucket="agent-inputs", path="7/abc.png", expires_in=3600, now=issued_at)
        == url
    )


def test_a_verifier_whose_clock_is_behind_the_issuers_accepts_the_url() -> None:
    now = timezone.now()
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png", now=now + timedelta(seconds=5))
    assert signed_url_verify(url, now=now).path == "7/abc.png"


def test_it_rejects_an_expired_url() -> None:
    now = timezone.now()
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png", expires_in=60, now=now)
    with pytest.raises(SignedUrlExpired, match="expired"):
        signed_url_verify(url, now=now + timedelta(seconds=60))


def test_it_rejects_a_token_with_a_changed_signature() -> None:
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png")
    token = _token(url)
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(SignedUrlTampered, match="signature"):
        signed_url_verify(_with_token(url, flipped))


def test_it_rejects_a_token_whose_claims_were_rewritten() -> None:
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png", expires_in=1)
    header, _payload, signature = _token(url).split(".")
    forged = {"url": "agent-inputs/7/abc.png", "iat": 0, "exp": 4_000_000_000}
    payload = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(SignedUrlTampered):
        signed_url_verify(_with_token(url, f"{header}.{payload}.{signature}"))


@pytest.mark.parametrize("kind", ["garbage", "junk after a genuine signature", "alg none"])
def test_a_token_of_three_parts_that_this_service_did_not_write_is_tampered(kind: str) -> None:
    header, payload, signature = _token(
        signed_url_create(bucket="agent-inputs", path="7/abc.png")
    ).split(".")
    unsigned = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    token = {
        "garbage": "a.b.c",
        "junk after a genuine signature": f"{header}.{payload}.{signature}!!!!",
        "alg none": f"{unsigned}.{payload}.{signature}",
    }[kind]
    with pytest.raises(SignedUrlTampered, match="signature"):
        signed_token_verify(bucket="agent-inputs", path="7/abc.png", token=token)


@pytest.mark.parametrize(
    ("bucket", "path"),
    [("agent-inputs", "8/abc.png"), ("other-bucket", "7/abc.png"), ("agent-inputs", "7/abc.jpg")],
)
def test_it_binds_the_token_to_its_bucket_and_path(bucket: str, path: str) -> None:
    token = _token(signed_url_create(bucket="agent-inputs", path="7/abc.png"))
    with pytest.raises(SignedUrlTampered, match="another object"):
        signed_token_verify(bucket=bucket, path=path, token=token)
    with pytest.raises(SignedUrlTampered):
        signed_url_verify(_with_token(signed_url_create(bucket=bucket, path=path), token))


def test_it_rejects_a_token_signed_with_another_secret(settings: Any) -> None:
    settings.ATTACHMENT_SIGNING_SECRET = "first-secret"
    url = signed_url_create(bucket="agent-inputs", path="7/abc.png")
    settings.ATTACHMENT_SIGNING_SECRET = "second-secret"
    with pytest.raises(SignedUrlTampered):
        signed_url_verify(url)


@pytest.mark.parametrize(
    "token",
    ["", "abc", "a.b", "a.b.c.d", "eyJhbGciOiJub25lIn0.eyJ1cmwiOiJ4In0.", "x" * 5000],
)
def test_it_rejects_a_malformed_token(token: str) -> None:
    with pytest.raises(SignedUrlInvalid):
        signed_token_verify(bucket="agent-inputs", path="7/abc.png", token=token)


def test_it_refuses_to_sign_an_unsafe_path() -> None:
    with pytest.raises(ObjectPathInvalid):
        signed_url_create(bucket="agent-inputs", path="../7/abc.png")


def test_it_quotes_what_it_signs_and_parses_it_back() -> None:
    url = signed_url_create(bucket="agent-inputs", path="7/图 片#1?.png")
    assert "图" not in url and " " not in url
    assert parse_signed_url(url) == {"bucket": "agent-inputs", "path": "7/图 片#1?.png"}
    assert signed_url_verify(url).path == "7/图 片#1?.png"


def test_it_parses_the_spec_example() -> None:
    url = f"{BASE}/agent-files/agent-inputs/u/t/r/img.jpg?token=xxx"
    assert parse_signed_url(url) == {"bucket": "agent-files", "path": "agent-inputs/u/t/r/img.jpg"}


def test_it_parses_a_url_with_more_query_parameters() -> None:
    url = f"{BASE}/agent-files/a/img.jpg?download=1&token=xxx"
    assert parse_signed_url(url) == {"bucket": "agent-files", "path": "a/img.jpg"}


def test_parse_does_not_vouch_for_the_token() -> None:
    url = f"{BASE}/agent-files/a/img.jpg?token=xxx"
    assert parse_signed_url(url)["path"] == "a/img.jpg"
    with pytest.raises(SignedUrlInvalid, match="token is malformed"):
        signed_url_verify(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "string"),
        ("not a url", "whitespace"),
        ("agent-files/a/img.jpg", "absolute"),
        ("/storage/v1/object/sign/agent-files/a/img.jpg?token=x", "absolute"),
        ("ftp://h/storage/v1/object/sign/agent-files/a/img.jpg?token=x", "absolute"),
        ("https://h/storage/v1/object/public/agent-files/a/img.jpg?token=x", "must start with"),
        ("https://h/agent-inputs/user-123/image.png?signature=xxx", "must start with"),
        (f"{BASE}/agent-files?token=x", "bucket and an object path"),
        (f"{BASE}/agent-files/?token=x", "bucket and an object path"),
        (f"{BASE}/agent-files/a/img.jpg", "exactly one token"),
        (f"{BASE}/agent-files/a/img.jpg?token=", "exactly one token"),
        (f"{BASE}/agent-files/a/img.jpg?token=x&token=y", "exactly one token"),
        (f"{BASE}/agent-files/a/../img.jpg?token=x", "'..'"),
        (f"{BASE}/agent-files/../etc/passwd?token=x", "'..'"),
        (f"{BASE}/agent-files/a/%2e%2e/img.jpg?token=x", "'..'"),
        (f"{BASE}/agent-files/a/%2E%2E/img.jpg?token=x", "'..'"),
        (f"{BASE}/agent-files/a/./img.jpg?token=x", "'..'"),
        (f"{BASE}/agent-files//etc/passwd?token=x", "'..'"),
        (f"{BASE}/agent-files/a//img.jpg?token=x", "'..'"),
        (f"{BASE}/agent-files/a/img.jpg/?token=x", "'..'"),
        (f"{BASE}/agent-files/a/%252e%252e/img.jpg?token=x", "percent"),
        (f"{BASE}/agent-files/a%2F..%2Fimg.jpg?token=x", "encoded slashes"),
        (f"{BASE}/agent-files/a%5C..%5Cimg.jpg?token=x", "backslash"),
        (f"{BASE}/agent-files/a\\..\\img.jpg?token=x", "backslash"),
        (f"{BASE}/agent-files/a/img%00.jpg?token=x", "control"),
        (f"{BASE}/agent-files/a/img%ff.jpg?token=x", "UTF-8"),
        (f"{BASE}/agent-files/a/im\ng.jpg?token=x", "whitespace"),
        (f" {BASE}/agent-files/a/img.jpg?token=x", "whitespace"),
        (f"{BASE}/%2e%2e/a/img.jpg?token=x", "bucket"),
        (f"{BASE}/agent_files!/a/img.jpg?token=x", "bucket"),
        ("https://[::1/storage/v1/object/sign/b/p?token=x", "not a valid URL"),
    ],
)
def test_it_rejects_anything_but_a_safe_signed_url(url: str, message: str) -> None:
    with pytest.raises(SignedUrlInvalid, match=message.replace(".", r"\.").replace("?", r"\?")):
        parse_signed_url(url)


@pytest.mark.parametrize(
    "path",
    [
        "/abs.png",
        "a/../b.png",
        "..",
        "a/./b.png",
        "a//b.png",
        "a/",
        "a\\b.png",
        "a\x00.png",
        "a%2e",
    ],
)
def test_it_rejects_unsafe_object_paths(path: str) -> None:
    with pytest.raises(ObjectPathInvalid, match="invalid path"):
        object_ref_validate(bucket="agent-inputs", path=path)


def test_it_accepts_a_plain_object_path() -> None:
    object_ref_validate(bucket="agent-inputs", path="12/0f3a.webp")


def _valid(bucket: str, path: str) -> bool:
    try:
        object_ref_validate(bucket=bucket, path=path)
    except ObjectPathInvalid:
        return False
    return True


# Paths near the edges of the rules: dots, slashes, controls and the like, mixed.
_EDGES = ["a", ".", "/", "\\", "%", "\x00", "\x1f", "\x7f", "\x9f", "\xa0", "é"]
_TRICKY = st.text(alphabet=st.sampled_from(_EDGES), max_size=12)


@given(path=st.one_of(_TRICKY, st.text(max_size=12)))
def test_the_schemas_path_pattern_is_exactly_what_the_server_takes(path: str) -> None:
    matches = re.fullmatch(PATH_PATTERN, path) is not None and len(path) <= MAX_PATH_LENGTH
    assert matches == _valid("agent-inputs", path)


@given(bucket=st.one_of(st.text(alphabet="aZ9._-/ ", max_size=66), st.text(max_size=8)))
def test_the_schemas_bucket_pattern_is_exactly_what_the_server_takes(bucket: str) -> None:
    assert (re.fullmatch(BUCKET_PATTERN, bucket) is not None) == _valid(bucket, "a.png")


_TOKENS = st.from_regex(TOKEN_PATTERN, fullmatch=True).filter(lambda t: len(t) <= MAX_TOKEN_LENGTH)


@given(token=_TOKENS)
def test_a_token_of_the_schemas_form_that_this_service_did_not_sign_is_forbidden(token: str):
    # The schema's form is what the server reads as a token: a made-up one is a 403 (not
    # this service's), never a 400 (not a token at all).
    with pytest.raises(SignedUrlTampered):
        signed_token_verify(bucket="agent-inputs", path="12/0f3a.webp", token=token)
