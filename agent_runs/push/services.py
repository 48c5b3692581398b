"""Push notifications (webhooks) from a durable outbox (docs/push.md).

A protocol edge registers where a client wants a task's updates (``push_config_create``) and,
in the transaction that changes the state it reports, writes one ``PushDelivery`` row per
config (``push_enqueue``): the state change and its notifications commit or roll back
together. PostgreSQL holds the outbox; RQ only carries the wake-ups. A delivery's job is
enqueued when the transaction commits, and the workers' periodic sweep
(``push_deliveries_enqueue_due``) enqueues every pending delivery that is due (a retry whose
back-off has passed, or one whose job Redis lost), so a Redis flush loses nothing.

Each attempt claims its row with one conditional ``UPDATE`` (pending, due) that counts the
attempt and leases the row past the request's timeout, so two workers never send the same
attempt at once, and a worker that dies mid-attempt leaves the row due again when its lease
ends: delivery is at least once, the delivery id (``X-Push-Delivery``) its idempotency key.
"""

import ipaddress
import json
import logging
import secrets
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Least, Now
from redis.exceptions import RedisError
from rq.job import Job, JobStatus

from agent_runs.errors import PushUrlRefused
from agent_runs.models import PushConfig, PushDelivery, Thread, UserProfile
from agent_runs.push.signing import DELIVERY_HEADER, SIGNATURE_HEADER, push_signature_header
from agent_runs.queues import runs_queue

logger = logging.getLogger(__name__)

# Named by dotted path: the core never imports the runtime (it runs on the worker).
PUSH_JOB = "agent_runs.runtime.jobs.push_deliver_job"
_LEASE_MARGIN_SECONDS = 30
_SWEEP_BATCH = 500
_MAX_DELAY = 24 * 3600.0  # a back-off never waits more than a day
_MAX_ERROR_CHARS = 2000
_RESPONSE_EXCERPT_BYTES = 500
_PENDING_JOB_STATUSES = {
    JobStatus.QUEUED,
    JobStatus.STARTED,
    JobStatus.DEFERRED,
    JobStatus.SCHEDULED,
}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

LAST_ATTEMPT_LOST = "the last attempt did not finish (its worker stopped)"
WEBHOOK_REMOVED = "the user's webhook URL was removed"
REFUSED_SCHEME = "only http and https URLs are allowed"
REFUSED_HOST = "the URL has no host"
REFUSED_PORT = "the URL's port is not a valid port"
REFUSED_UNRESOLVED = "the host does not resolve"
REFUSED_PRIVATE = (
    "the host is a private, loopback, link-local or reserved address "
    "(PUSH_ALLOW_PRIVATE_URLS is off)"
)


# --- Push URLs -------------------------------------------------------------------------


def push_url_check(url: str) -> list[str]:
    """Refuse a URL the server must not call (``PushUrlRefused``, docs/push.md "Push URLs"):
    anything but http(s), and, unless ``PUSH_ALLOW_PRIVATE_URLS``, a host any of whose
    addresses is private, loopback, link-local, multicast, reserved or unspecified (IPv4 and
    IPv6, IPv4 inside IPv6 too). Returns the addresses the host resolved to, to connect to
    those and no others (a second lookup could answer otherwise: DNS rebinding)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise PushUrlRefused(REFUSED_SCHEME)
    host = parts.hostname
    if not host:
        raise PushUrlRefused(REFUSED_HOST)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PushUrlRefused(REFUSED_PORT) from None
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise PushUrlRefused(REFUSED_UNRESOLVED) from None
    addresses = list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in found))
    if not addresses:
        raise PushUrlRefused(REFUSED_UNRESOLVED)
    if not settings.PUSH_ALLOW_PRIVATE_URLS and not all(map(_is_public, addresses)):
        raise PushUrlRefused(REFUSED_PRIVATE)
    return addresses


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
        if ip in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(v4 is not None and not _is_public(str(v4)) for v4 in embedded):
            return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


# --- Configs and the outbox -------------------------------------------------------------


def push_config_create(
    *,
    thread: Thread,
    protocol: str,
    task_ref: str,
    url: str,
    config_ref: str = "",
    token: str = "",
    token_header: str = "",
    secret: str | None = None,
) -> PushConfig:
    """Register (or replace: same thread, protocol, task and ``config_ref``) where a task's
    updates are pushed. The config belongs to the thread's owner; the URL is checked
    (``push_url_check``). ``secret`` signs the deliveries; one is generated when not given
    (a replaced config keeps its secret unless a new one is given)."""
    push_url_check(url)
    fields = {"owner_id": thread.owner_id, "url": url, "token": token}
    fields["token_header"] = token_header
    if secret is not None:
        fields["secret"] = secret
    config, _ = PushConfig.objects.update_or_create(
        thread=thread,
        protocol=protocol,
        task_ref=task_ref,
        config_ref=config_ref,
        defaults=fields,
        create_defaults={**fields, "secret": secret or secrets.token_urlsafe(32)},
    )
    return config


def push_config_delete(*, config: PushConfig) -> None:
    """Remove a config and its deliveries (pending ones are no longer sent)."""
    config.delete()


def push_enqueue(*, configs: Iterable[PushConfig], body: Mapping[str, Any]) -> list[PushDelivery]:
    """Write one pending delivery of ``body`` (JSON, rendered by the caller in its protocol's
    shape) per config, in the caller's transaction; their jobs are enqueued when it commits
    (at once outside a transaction). Rolled back with the caller, nothing is sent."""
    return _outbox_write([PushDelivery(config=config, body=body) for config in configs])


def push_enqueue_to_user(
    *, profile: UserProfile, bodies: Iterable[Mapping[str, Any]]
) -> list[PushDelivery]:
    """Write one pending delivery per body to the user's own webhook (the profile's
    ``webhook_url``), in the caller's transaction, as ``push_enqueue`` does."""
    return _outbox_write([PushDelivery(profile=profile, body=body) for body in bodies])


def _outbox_write(deliveries: list[PushDelivery]) -> list[PushDelivery]:
    deliveries = PushDelivery.objects.bulk_create(deliveries)
    if deliveries:
        ids = [delivery.pk for delivery in deliveries]
        transaction.on_commit(lambda: push_deliveries_enqueue(delivery_ids=ids))
    return deliveries


def push_deliveries_enqueue(*, delivery_ids: Iterable[uuid.UUID]) -> None:
    """Put the deliveries' jobs on the queue. Redis being down loses nothing: the rows stay
    pending and the sweep enqueues them."""
    queue = runs_queue()
    try:
        for delivery_id in delivery_ids:
            queue.enqueue(
                PUSH_JOB,
                str(delivery_id),
                job_id=_job_id(delivery_id),
                job_timeout=int(settings.PUSH_TIMEOUT_SECONDS) + _LEASE_MARGIN_SECONDS,
                result_ttl=600,
                failure_ttl=24 * 3600,
            )
    except RedisError:
        logger.exception("could not enqueue push deliveries; the sweep enqueues them")


def push_deliveries_enqueue_due() -> int:
    """Enqueue the pending deliveries that are due (a retry whose back-off has passed, a
    job Redis lost, an attempt whose worker died), unless their job is still waiting or
    working. Workers run it with ``runs_recover``. Returns how many were enqueued."""
    pending_due = PushDelivery.objects.filter(
        status=PushDelivery.Status.PENDING, next_attempt_at__lte=Now()
    )
    # The last attempt's worker stopped before it recorded the attempt (its lease ran out).
    pending_due.filter(attempts__gte=settings.PUSH_MAX_ATTEMPTS).update(
        status=PushDelivery.Status.FAILED, last_error=LAST_ATTEMPT_LOST
    )
    due = list(pending_due.order_by("next_attempt_at").values_list("pk", flat=True)[:_SWEEP_BATCH])
    if not due:
        return 0
    try:
        jobs = Job.fetch_many([_job_id(pk) for pk in due], connection=runs_queue().connection)
    except RedisError:
        logger.warning("could not look up %d push jobs", len(due), exc_info=True)
        return 0
    idle = [
        pk
        for pk, job in zip(due, jobs, strict=True)
        if job is None or job.get_status(refresh=False) not in _PENDING_JOB_STATUSES
    ]
    push_deliveries_enqueue(delivery_ids=idle)
    return len(idle)


def push_deliveries_retry(*, deliveries: QuerySet[PushDelivery]) -> int:
    """Staff's "retry now": the deliveries not yet delivered are due again at once, failed
    ones pending again for one more attempt. Returns how many."""
    ids = list(
        deliveries.exclude(status=PushDelivery.Status.DELIVERED).values_list("pk", flat=True)
    )
    PushDelivery.objects.filter(pk__in=ids).update(
        status=PushDelivery.Status.PENDING,
        next_attempt_at=Now(),
        attempts=Least(F("attempts"), settings.PUSH_MAX_ATTEMPTS - 1),
    )
    transaction.on_commit(lambda: push_deliveries_enqueue(delivery_ids=ids))
    return len(ids)


def _job_id(delivery_id: uuid.UUID) -> str:
    return f"push-{delivery_id}"


# --- Delivery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    status_code: int | None
    error: str

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def push_delivery_attempt(*, delivery_id: uuid.UUID) -> PushDelivery | None:
    """Make one attempt at a pending, due delivery: POST its body, signed, to its config's
    URL. 2xx: delivered. Otherwise the attempt is recorded (``last_error``,
    ``last_status_code``) and the next one is due after ``PUSH_RETRY_BASE_SECONDS * 2**(n-1)``
    (n attempts made), or the delivery is failed after ``PUSH_MAX_ATTEMPTS``. Returns the
    delivery as the attempt left it, or ``None`` when it was not due (delivered, failed,
    or another worker's attempt in flight)."""
    lease = timedelta(seconds=settings.PUSH_TIMEOUT_SECONDS + _LEASE_MARGIN_SECONDS)
    claimed = PushDelivery.objects.filter(
        pk=delivery_id,
        status=PushDelivery.Status.PENDING,
        next_attempt_at__lte=Now(),
        attempts__lt=settings.PUSH_MAX_ATTEMPTS,
    ).update(attempts=F("attempts") + 1, next_attempt_at=Now() + lease)
    if not claimed:
        return None
    delivery = PushDelivery.objects.select_related("config", "profile").get(pk=delivery_id)
    try:
        outcome = _post(delivery)
    except Exception as exc:  # a header httpx refuses, a body it cannot send: a failed attempt
        logger.exception("push delivery %s failed unexpectedly", delivery_id)
        outcome = _Outcome(None, f"{type(exc).__name__}: {exc}")
    if outcome.delivered:
        changes: dict[str, object] = {
            "status": PushDelivery.Status.DELIVERED,
            "delivered_at": Now(),
            "last_error": "",
        }
    else:
        final = delivery.attempts >= settings.PUSH_MAX_ATTEMPTS
        delay = min(settings.PUSH_RETRY_BASE_SECONDS * 2 ** (delivery.attempts - 1), _MAX_DELAY)
        changes = {
            "status": PushDelivery.Status.FAILED if final else PushDelivery.Status.PENDING,
            "last_error": outcome.error[:_MAX_ERROR_CHARS],
            "next_attempt_at": Now() + timedelta(seconds=delay),
        }
    # Fenced on the attempt: a lease that ran out let another attempt start; its result wins.
    PushDelivery.objects.filter(
        pk=delivery_id, status=PushDelivery.Status.PENDING, attempts=delivery.attempts
    ).update(last_status_code=outcome.status_code, **changes)
    delivery.refresh_from_db()
    return delivery


@dataclass(frozen=True)
class _Target:
    """Where a delivery goes, as it stands now: a push config's, or a user's own webhook."""

    url: str
    secret: str
    token: str = ""
    token_header: str = ""


def _target(delivery: PushDelivery) -> _Target | None:
    """The delivery's target; ``None`` when it is a user's webhook whose URL was removed."""
    if delivery.config is not None:
        config = delivery.config
        return _Target(config.url, config.secret, config.token, config.token_header)
    profile = delivery.profile
    if profile is None or not profile.webhook_url:
        return None
    return _Target(profile.webhook_url, profile.webhook_secret)


def _post(delivery: PushDelivery) -> _Outcome:
    """POST the delivery's body to the addresses its URL resolves to now (checked again:
    the host's DNS may have changed since the config was made), no redirects followed."""
    target = _target(delivery)
    if target is None:
        return _Outcome(None, WEBHOOK_REMOVED)
    body = json.dumps(delivery.body, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "agent-run-server-push/1",
        SIGNATURE_HEADER: push_signature_header(
            secret=target.secret, timestamp=int(time.time()), body=body
        ),
        DELIVERY_HEADER: str(delivery.pk),
    }
    if target.token and target.token_header:
        headers[target.token_header] = target.token
    try:
        addresses = push_url_check(target.url)
    except PushUrlRefused as refused:
        return _Outcome(None, str(refused))
    url = httpx.URL(target.url)
    headers["Host"] = url.netloc.decode("ascii")
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
    error = REFUSED_UNRESOLVED
    with httpx.Client(
        timeout=settings.PUSH_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
    ) as client:
        for address in addresses:
            try:
                with client.stream(
                    "POST",
                    url.copy_with(host=address),
                    content=body,
                    headers=headers,
                    extensions=extensions,
                ) as response:
                    return _Outcome(response.status_code, _response_error(response))
            except httpx.ConnectError as exc:  # the host's next address may answer
                error = f"{type(exc).__name__}: {exc}"
            except httpx.HTTPError as exc:
                return _Outcome(None, f"{type(exc).__name__}: {exc}")
    return _Outcome(None, error)


def _response_error(response: httpx.Response) -> str:
    if 200 <= response.status_code < 300:
        return ""
    excerpt = b""
    for chunk in response.iter_bytes():
        excerpt += chunk
        if len(excerpt) >= _RESPONSE_EXCERPT_BYTES:
            break
    text = excerpt[:_RESPONSE_EXCERPT_BYTES].decode("utf-8", "replace").strip()
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")
