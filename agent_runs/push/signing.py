"""The signature of a push notification (docs/push.md, "Verifying a delivery"): pure
functions, no ORM and no I/O, used by the sender and by any receiver written in Python.

``X-Push-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``. The
timestamp is signed with the body, so a receiver that refuses a timestamp outside its replay
window (``PUSH_SIGNATURE_TOLERANCE_SECONDS`` by default) refuses a replayed request; the
delivery id (``X-Push-Delivery``) lets it drop a delivery it has already handled.
"""

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Push-Signature"
DELIVERY_HEADER = "X-Push-Delivery"
PUSH_SIGNATURE_TOLERANCE_SECONDS = 300


def push_signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def push_signature_header(*, secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={push_signature(secret=secret, timestamp=timestamp, body=body)}"


def push_signature_verify(
    *,
    header: str,
    body: bytes,
    secret: str,
    tolerance: int = PUSH_SIGNATURE_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """Whether ``header`` signs ``body`` under ``secret`` with a timestamp at most
    ``tolerance`` seconds from ``now``. Any ``v1`` entry may match (a receiver rotating
    secrets checks each of its secrets in turn)."""
    fields = [part.strip().partition("=") for part in header.split(",")]
    stamps = [value for key, _, value in fields if key == "t"]
    signatures = [value for key, _, value in fields if key == "v1"]
    if len(stamps) != 1 or not stamps[0].isdigit() or not signatures:
        return False
    timestamp = int(stamps[0])
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = push_signature(secret=secret, timestamp=timestamp, body=body)
    return any(hmac.compare_digest(expected, signature) for signature in signatures)
