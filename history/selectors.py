"""Reads of the history API: which thread, which day, which messages.

docs/spec/run-agent-input.md, History API; docs/spec/sse-events-and-usage.md, section 8 (only
messages visible to ``ui.history``, and a model's reasoning when asked for). A day is the
user's day: midnight to midnight in the profile's timezone (``UserProfile.settings
["timezone"]``, UTC when unset or not an IANA zone).

Every message read is a range of the ``(thread, created_at)`` index: the latest visible
message before a bound (its day is the answer's day), that day's messages, and whether one
exists before that day. Nothing scans a thread.
"""

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery
from django.http import Http404

from agent_runs.models import Message, Run, Thread, Visibility
from agent_runs.selectors.profiles import user_locale, user_timezone
from history.projection import HistoryDay, history_snapshot_response
from history.schemas import HistorySnapshotResponse


def history_snapshot_get(
    *,
    user: AbstractBaseUser,
    thread_id: uuid.UUID | None,
    before: date | None,
    include_reasoning: bool = False,
) -> HistorySnapshotResponse:
    """``GET /api/v1/agent/history``: the day snapshot, ready for the wire. A thread that is
    not the caller's is ``Http404``."""
    return history_snapshot_response(
        day=history_day_get(
            user=user, thread_id=thread_id, before=before, include_reasoning=include_reasoning
        )
    )


def history_day_get(
    *,
    user: AbstractBaseUser,
    thread_id: uuid.UUID | None,
    before: date | None,
    include_reasoning: bool = False,
) -> HistoryDay:
    """The most recent of the user's days with visible messages (strictly before ``before``
    when given) in ``thread_id``, or in the user's most recent thread when it is ``None``;
    with ``include_reasoning``, a model's reasoning is visible too.

    ``thread_id`` is ``None`` in the answer only when the caller named no thread and has no
    visible message anywhere; ``day`` is ``None`` when the thread has no such day."""
    found = _history_thread(user, thread_id)
    if found is None:
        return HistoryDay(None, None, has_more=False, messages=[], locale="en")
    thread_id, profile = found
    zone, locale = _zone_and_locale(profile)
    visible = _visible_messages(thread_id, include_reasoning=include_reasoning)
    bounded = visible.filter(created_at__lt=_day_start(before, zone)) if before else visible
    latest = bounded.order_by("-created_at").values_list("created_at", flat=True).first()
    if latest is None:
        return HistoryDay(thread_id, None, has_more=False, messages=[], locale=locale)
    day = latest.astimezone(zone).date()
    messages, has_more = _day_messages(visible, day, zone)
    return HistoryDay(thread_id, day, has_more=has_more, messages=messages, locale=locale)


def _history_thread(
    user: AbstractBaseUser, thread_id: uuid.UUID | None
) -> tuple[uuid.UUID, Any] | None:
    """(id, owner's profile) of the thread named (``Http404`` if not the user's), or of the
    user's most recent thread with a visible message (``None``: there is none)."""
    if thread_id is None:
        return _latest_thread(user)
    found = _user_threads(user).filter(pk=thread_id).values_list("pk", _PROFILE).first()
    if found is None:
        raise Http404
    return found


def _day_messages(
    visible: QuerySet[Message], day: date, zone: ZoneInfo
) -> tuple[list[Message], bool]:
    """The visible messages of ``day`` in ``seq`` order, and whether any is earlier."""
    start = _day_start(day, zone)
    messages = list(
        visible.filter(created_at__gte=start, created_at__lt=_day_after(day, zone))
        .order_by("seq")
        .only("message_id", "seq", "role", "content", "metadata", "visibility_mask", "created_at")
    )
    # Ordered, so that it is an index probe rather than a scan hoping to meet a row early.
    earlier = visible.filter(created_at__lt=start).order_by("-created_at")
    return messages, earlier.values_list("pk", flat=True).first() is not None


def _visible_messages(
    thread_id: uuid.UUID | OuterRef, *, include_reasoning: bool = False
) -> QuerySet[Message]:
    """Messages ``ui.history`` may show: the bit set (or, ``include_reasoning``, the
    ``reasoning`` bit), never a tool message, and never one of a run a multitask
    ``rollback`` cancelled (docs/protocols/multitask.md: staff still see it in the admin)."""
    bits = Visibility.UI_HISTORY | (Visibility.REASONING if include_reasoning else 0)
    return (
        Message.objects.filter(
            thread_id=thread_id, role__in=[Message.Role.USER, Message.Role.ASSISTANT]
        )
        .alias(on_history=F("visibility_mask").bitand(int(bits)))
        .filter(on_history__gt=0)
        .exclude(Exists(Run.objects.filter(pk=OuterRef("run_id"), rolled_back=True)))
    )


# The owner's profile settings come with the thread, in the same query.
_PROFILE = "owner__agent_profile__settings"


def _user_threads(user: AbstractBaseUser) -> QuerySet[Thread]:
    """The caller's threads: another user's thread is a 404, never a 403."""
    return Thread.objects.filter(owner_id=user.pk)


def _latest_thread(user: AbstractBaseUser) -> tuple[uuid.UUID, Any] | None:
    """The user's thread with the most recent visible message (one index probe a thread),
    with the user's profile settings."""
    last_visible = (
        _visible_messages(OuterRef("pk")).order_by("-created_at").values("created_at")[:1]
    )
    latest = (
        _user_threads(user)
        .annotate(last_visible_at=Subquery(last_visible))
        .order_by(F("last_visible_at").desc(nulls_last=True))
        .values_list("pk", "last_visible_at", _PROFILE)
        .first()
    )
    if latest is None or latest[1] is None:
        return None
    return latest[0], latest[2]


def _zone_and_locale(profile: Any) -> tuple[ZoneInfo, str]:
    """The profile's zone (UTC when unset or not an IANA zone) and locale."""
    profile = profile if isinstance(profile, dict) else {}
    return user_timezone(profile) or ZoneInfo("UTC"), user_locale(profile)


def _day_start(day: date, zone: ZoneInfo) -> datetime:
    """The instant the user's ``day`` begins. On a day whose midnight a DST change skips,
    zoneinfo reads 00:00 with the earlier offset, which is the instant of the change."""
    try:
        return datetime.combine(day, time.min, tzinfo=zone).astimezone(UTC)
    except OverflowError:  # 0001-01-01 east of UTC: nothing is earlier
        return datetime.min.replace(tzinfo=UTC)


def _day_after(day: date, zone: ZoneInfo) -> datetime:
    if day == date.max:
        return datetime.max.replace(tzinfo=UTC)
    return _day_start(day + timedelta(days=1), zone)
