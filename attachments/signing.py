"""Signed URLs in Supabase's shape, issued and verified by this service.

docs/spec/chat-messages-and-attachments.md, User Message Attachments, Signed URL Format:
``{PUBLIC_BASE_URL}/storage/v1/object/sign/{bucket}/{path}?token={jwt}``. The token is an HS256
JWT, as Supabase's is (issued and checked by PyJWT): its ``url`` claim binds it to
``{bucket}/{path}`` and its ``exp`` claim ends it. Pure functions: no ORM and no I/O; the secret
and defaults come from settings.
"""

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import jwt
from django.conf import settings
from django.utils import timezone
from jwt.types import Options

from attachments.errors import (
    ObjectPathInvalid,
    SignedUrlExpired,
    SignedUrlInvalid,
    SignedUrlTampered,
)

SIGN_PREFIX = "/storage/v1/object/sign/"
MAX_PATH_LENGTH = 1024
_MAX_URL_LENGTH = 4096
MAX_TOKEN_LENGTH = 2048
# A token's form (three dot-separated parts); one of that form that this service did not sign
# as it stands is a 403 (``SignedUrlTampered``), one of any other form a 400.
TOKEN_PATTERN = r"^[^.]+\.[^.]+\.[^.]+$"
# Supabase and S3 bucket names: short, plain, and never "." or "..".
BUCKET_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
_BUCKET = re.compile(BUCKET_PATTERN[1:-1])
# What ``object_ref_validate`` takes for a path, as a pattern (the schema's): segments of
# characters other than "/", "\", "%" and control characters, none of them "." or "..".
_SEGMENT_CHAR = r"[^/\\%\u0000-\u001f\u007f-\u009f]"
_SEGMENT_START = r"[^/\\%.\u0000-\u001f\u007f-\u009f]"
_SEGMENT = (
    rf"(?:{_SEGMENT_START}{_SEGMENT_CHAR}*|\.{_SEGMENT_START}{_SEGMENT_CHAR}*|\.\.{_SEGMENT_CHAR}+)"
)
PATH_PATTERN = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
# A dedicated key, derived from the secret with this salt, so no other signature of the
# project (sessions, stream tokens) can pass for a signed URL's.
_KEY_SALT = b"attachments.signed-url.v1"
_ALGORITHM = "HS256"
# PyJWT checks the signature and the claims' shape; ``exp`` is compared here, against the
# ``now`` the caller gives. ``iat`` is informative only: a verifier whose clock runs a little
# behind the issuer's must not refuse a URL as "not yet valid".
_DECODE_OPTIONS: Options = {
    "verify_exp": False,
    "verify_iat": False,
    "require": ["url", "exp"],
}


class ObjectRef(TypedDict):
    """Where an object lives: the spec's ``{bucket, path}``."""

    bucket: str
    path: str


@dataclass(frozen=True)
class SignedObject:
    """The object a genuine, unexpired signed URL grants, and when the grant ends."""

    bucket: str
    path: str
    expires_at: datetime


def object_ref_validate(*, bucket: str, path: str) -> None:
    """Refuse a bucket or path that could leave its place in storage: ``..`` or ``.``
    segments, an absolute path, empty segments, backslashes, percent signs (a second round of
    decoding must find nothing), NULs and other control characters."""
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        raise ObjectPathInvalid("invalid bucket: use letters, digits, '.', '_' or '-' (max 63)")
    if not isinstance(path, str) or not path:
        raise ObjectPathInvalid("invalid path: it must not be empty")
    if len(path) > MAX_PATH_LENGTH:
        raise ObjectPathInvalid(f"invalid path: it exceeds {MAX_PATH_LENGTH} characters")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise ObjectPathInvalid(
                "invalid path: it must be relative, without empty, '.' or '..' segments"
            )
        if "\\" in segment or "%" in segment or any(_is_control(char) for char in segment):
            raise ObjectPathInvalid(
                "invalid path: backslashes, percent signs and control characters are not allowed"
            )


def signed_url_create(
    *, bucket: str, path: str, expires_in: int | None = None, now: datetime | None = None
) -> str:
    """A signed URL for ``bucket``/``path`` that expires ``expires_in`` seconds from ``now``
    (default ``ATTACHMENT_SIGNED_URL_TTL_SECONDS``)."""
    object_ref_validate(bucket=bucket, path=path)
    ttl = settings.ATTACHMENT_SIGNED_URL_TTL_SECONDS if expires_in is None else expires_in
    if ttl <= 0:
        raise ValueError("expires_in must be positive")
    issued_at = int((now or timezone.now()).timestamp())
    claims = {"url": f"{bucket}/{path}", "iat": issued_at, "exp": issued_at + ttl}
    token = jwt.encode(claims, _key(), algorithm=_ALGORITHM)
    quoted = "/".join(quote(segment, safe="") for segment in [bucket, *path.split("/")])
    base_url = settings.PUBLIC_BASE_URL.rstrip("/")
    return f"{base_url}{SIGN_PREFIX}{quoted}?{urlencode({'token': token})}"


def parse_signed_url(url: str) -> ObjectRef:
    """``{bucket, path}`` of a Supabase-shaped signed URL
    (docs/spec/chat-messages-and-attachments.md, Signed URL Format): ``bucket`` is the path
    segment after ``/sign/``, ``path`` the rest.

    Any host is accepted (this service's or a Supabase project's); the URL must be absolute
    http(s), carry exactly one ``token`` and name a safe bucket and path. The token is not
    checked here: ``signed_url_verify`` does that.
    """
    ref, _token = _split_signed_url(url)
    return ref


def signed_url_verify(url: str, *, now: datetime | None = None) -> SignedObject:
    """The object a signed URL of this service grants: the URL parsed as ``parse_signed_url``
    does, then its token checked against that bucket and path. Raises ``SignedUrlInvalid``
    for a wrong shape, ``SignedUrlTampered`` for a bad signature or a token of another object,
    and ``SignedUrlExpired`` once its time is up."""
    ref, token = _split_signed_url(url)
    return signed_token_verify(bucket=ref["bucket"], path=ref["path"], token=token, now=now)


def signed_token_verify(
    *, bucket: str, path: str, token: str, now: datetime | None = None
) -> SignedObject:
    """Check a signed URL's token against the bucket and path it was presented with.
    Raises ``ObjectPathInvalid`` for an unsafe bucket or path, otherwise as
    ``signed_url_verify``."""
    object_ref_validate(bucket=bucket, path=path)
    claims = _token_claims(token)
    if not hmac.compare_digest(claims["url"].encode(), f"{bucket}/{path}".encode()):
        raise SignedUrlTampered("signed URL token was issued for another object")
    current = int((now or timezone.now()).timestamp())
    if claims["exp"] <= current:
        raise SignedUrlExpired("signed URL has expired")
    return SignedObject(
        bucket=bucket, path=path, expires_at=datetime.fromtimestamp(claims["exp"], tz=UTC)
    )


def _split_signed_url(url: Any) -> tuple[ObjectRef, str]:
    """The bucket and path a signed URL names, and its token (not checked here): the one
    parser of ``parse_signed_url`` and ``signed_url_verify``."""
    if not isinstance(url, str) or not url or len(url) > _MAX_URL_LENGTH:
        raise SignedUrlInvalid(f"signed URL must be a string of 1 to {_MAX_URL_LENGTH} characters")
    # urlsplit silently drops tabs, newlines and leading blanks: refuse them instead.
    if any(_is_control(char) or char.isspace() for char in url):
        raise SignedUrlInvalid("signed URL must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise SignedUrlInvalid("signed URL is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SignedUrlInvalid("signed URL must be an absolute http(s) URL")
    if not parts.path.startswith(SIGN_PREFIX):
        raise SignedUrlInvalid(f"signed URL path must start with {SIGN_PREFIX}")
    raw_bucket, slash, raw_path = parts.path.removeprefix(SIGN_PREFIX).partition("/")
    if not raw_bucket or not slash or not raw_path:
        raise SignedUrlInvalid("signed URL must name a bucket and an object path")
    segments = [_decode_segment(segment) for segment in [raw_bucket, *raw_path.split("/")]]
    bucket, path = segments[0], "/".join(segments[1:])
    try:
        object_ref_validate(bucket=bucket, path=path)
    except ObjectPathInvalid as exc:
        raise SignedUrlInvalid(f"signed URL has an {exc}") from None
    tokens = parse_qs(parts.query, keep_blank_values=True).get("token", [])
    if len(tokens) != 1 or not tokens[0]:
        raise SignedUrlInvalid("signed URL must carry exactly one token")
    return ObjectRef(bucket=bucket, path=path), tokens[0]


def _decode_segment(segment: str) -> str:
    try:
        decoded = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise SignedUrlInvalid("signed URL path is not valid percent-encoded UTF-8") from None
    if "/" in decoded:
        raise SignedUrlInvalid("signed URL path must not contain encoded slashes")
    return decoded


def _token_claims(token: Any) -> dict[str, Any]:
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
        raise SignedUrlInvalid("signed URL token is missing or malformed")
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise SignedUrlInvalid("signed URL token is malformed")
    try:
        claims: dict[str, Any] = jwt.decode(
            token, _key(), algorithms=[_ALGORITHM], options=_DECODE_OPTIONS
        )
    except jwt.MissingRequiredClaimError:
        # Claims are read once the signature holds: signed here, but not as this module signs.
        raise SignedUrlInvalid("signed URL token is malformed") from None
    except jwt.InvalidTokenError:
        # Three parts, but not a token this service signed: a signature that does not match,
        # or a header, payload or signature that is not even well-formed (PyJWT refuses those
        # before it gets to the signature, which could not match either).
        raise SignedUrlTampered("signed URL token signature is invalid") from None
    # The signature holds, so this service wrote the token; check its shape all the same.
    if not isinstance(claims["url"], str) or type(claims["exp"]) is not int:
        raise SignedUrlInvalid("signed URL token is malformed")
    return claims


def _key() -> bytes:
    secret = settings.ATTACHMENT_SIGNING_SECRET or settings.SECRET_KEY
    return hmac.new(secret.encode(), _KEY_SALT, hashlib.sha256).digest()


def _is_control(char: str) -> bool:
    return ord(char) < 32 or 127 <= ord(char) < 160
