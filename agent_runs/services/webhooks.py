"""A user's own webhook (docs/push.md, "The user's webhook"): a URL on the user's profile
that is told, through the push outbox, when one of the user's runs stops on an interrupt,
so that a third system (a chat bot, a pager, an inbox) can ask a person and answer it with
``POST /api/v1/agent/interrupts/{id}``."""

import secrets
from collections.abc import Sequence
from typing import Any

from agent_runs.models import Interrupt, Run, Thread, UserProfile
from agent_runs.push.services import push_enqueue_to_user, push_url_check
from agent_runs.selectors.interrupts import interrupt_detail

INTERRUPT_OPENED = "interrupt.opened"


def user_webhook_set(*, profile: UserProfile, url: str, secret: str = "") -> UserProfile:
    """Set (or, with ``url`` "", remove) the user's webhook. The URL is checked as a push
    URL (``PushUrlRefused``); ``secret`` signs the deliveries: a new one is generated when
    none is given and the profile has none yet (else the profile keeps its own)."""
    if url:
        push_url_check(url)
    profile.webhook_url = url
    if secret:
        profile.webhook_secret = secret
    elif url and not profile.webhook_secret:
        profile.webhook_secret = secrets.token_urlsafe(32)
    profile.save(update_fields=["webhook_url", "webhook_secret"])
    return profile


def interrupts_opened_push(*, run: Run, interrupts: Sequence[Interrupt]) -> None:
    """One ``interrupt.opened`` delivery per interrupt to the webhook of the run's thread's
    owner, when the owner has one, in the caller's transaction (the one that made them):
    one query when the owner has none."""
    if not interrupts:
        return
    owner = Thread.objects.filter(pk=run.thread_id).values("owner_id")
    profile = UserProfile.objects.filter(user_id__in=owner).exclude(webhook_url="").first()
    if profile is None:
        return
    bodies = [interrupt_opened_body(interrupt=item, run=run) for item in interrupts]
    push_enqueue_to_user(profile=profile, bodies=bodies)


def interrupt_opened_body(*, interrupt: Interrupt, run: Run) -> dict[str, Any]:
    """``{"type": "interrupt.opened", "interrupt": ...}``: the interrupt as
    ``GET /api/v1/agent/interrupts/{id}`` answers it when it opens (docs/protocols/agui.md)."""
    interrupt.run = run
    return {"type": INTERRUPT_OPENED, "interrupt": interrupt_detail(interrupt)}
