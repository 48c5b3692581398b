"""The delivery signature a receiver checks (docs/push.md, "Verifying a delivery")."""

import hashlib
import hmac

from agent_runs.push.signing import push_signature_header, push_signature_verify

BODY = b'{"taskId":"t-1","status":{"state":"completed"}}'
NOW = 1_800_000_000


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_raw_body():
    header = push_signature_header(secret="s3cret", timestamp=NOW, body=BODY)
    expected = hmac.new(b"s3cret", f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert header == f"t={NOW},v1={expected}"


def test_a_receiver_accepts_it_within_the_replay_window():
    header = push_signature_header(secret="s3cret", timestamp=NOW, body=BODY)
    assert push_signature_verify(header=header, body=BODY, secret="s3cret", now=NOW + 299)
    assert push_signature_verify(header=header, body=BODY, secret="s3cret", now=NOW - 299)


def test_a_receiver_refuses_a_replay_a_tampered_body_or_another_secret():
    header = push_signature_header(secret="s3cret", timestamp=NOW, body=BODY)
    assert not push_signature_verify(header=header, body=BODY, secret="s3cret", now=NOW + 301)
    assert not push_signature_verify(header=header, body=BODY + b" ", secret="s3cret", now=NOW)
    assert not push_signature_verify(header=header, body=BODY, secret="other", now=NOW)


def test_a_receiver_refuses_a_malformed_header():
    for header in ("", "v1=abc", f"t={NOW}", "t=x,v1=abc", f"t={NOW},t={NOW},v1=abc"):
        assert not push_signature_verify(header=header, body=BODY, secret="s3cret", now=NOW)
