"""Built-in calendar tools over ``CalendarEvent``, owned by the run's user.

Event times follow docs/spec/run-agent-input.md, "时间来源优先级": the tool's explicit
``event_timezone``, then ``forwardedProps.client_time.device_timezone``, then the user's profile
timezone, then UTC; never the server's local zone. Relative times ("tomorrow 09:00") are read
against ``client_time.client_now_iso`` when the client sent it, counting days in the event's
timezone. Results are compact facts.
"""

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone

from agent_runs.db import db_call
from agent_runs.models import CalendarEvent
from agent_runs.run_input import iana_timezones
from agent_runs.runtime.tools.context import ToolContext
from agent_runs.selectors.profiles import user_profile_settings

_RELATIVE = re.compile(r"^(today|tomorrow)[ T]+(\d{1,2}):(\d{2})$", re.IGNORECASE)


class CalendarToolError(ValueError):
    """A tool input the tool cannot use; the agent sees the message and may try again."""


def resolve_event_timezone(
    *, explicit: str | None, client_time: dict[str, Any] | None, profile_timezone: str | None
) -> str:
    """The zone an event is meant in, by the spec's fixed priority."""
    if explicit:
        if explicit not in iana_timezones():
            raise CalendarToolError(f"event_timezone {explicit!r} is not an IANA timezone")
        return explicit
    device = (client_time or {}).get("device_timezone")
    if device and device in iana_timezones():
        return str(device)
    if profile_timezone and profile_timezone in iana_timezones():
        return profile_timezone
    return "UTC"


def resolve_local_time(text: str, *, zone: str, now: datetime) -> datetime:
    """The UTC instant of ``text`` read in ``zone``: an ISO 8601 time (an offset in it wins),
    or "today HH:MM" / "tomorrow HH:MM" counted from ``now``."""
    tz = ZoneInfo(zone)
    relative = _RELATIVE.match(text.strip())
    if relative:
        day = now.astimezone(tz).date()
        if relative.group(1).lower() == "tomorrow":
            day += timedelta(days=1)
        hour, minute = int(relative.group(2)), int(relative.group(3))
        if hour > 23 or minute > 59:
            raise CalendarToolError(f"{text!r} is not a time of day")
        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
        return local.astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CalendarToolError(
            f"{text!r} is not a time: use ISO 8601 (2026-03-17T09:00) or 'tomorrow 09:00'"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz)
    return parsed.astimezone(UTC)


def reference_now(client_time: dict[str, Any] | None) -> datetime:
    """The client's "now" when it sent one, else the server's clock (as an instant)."""
    sent = (client_time or {}).get("client_now_iso")
    if sent:
        try:
            return datetime.fromisoformat(str(sent).replace("Z", "+00:00"))
        except ValueError:
            pass
    return timezone.now()


def calendar_tools(context: ToolContext) -> list[Any]:
    """The four calendar tools, bound to one run's user and client time."""
    return [
        _calendar_create_tool(context),
        _calendar_list_tool(context),
        _calendar_update_tool(context),
        _calendar_delete_tool(context),
    ]


def _calendar_create_tool(context: ToolContext) -> Any:
    async def calendar_create(
        title: str, start: str, end: str | None = None, event_timezone: str | None = None
    ) -> dict[str, Any]:
        """Create a calendar event for the user.

        Args:
            title: What the event is.
            start: When it starts, in the event's local time: ISO 8601 like
                "2026-03-17T09:00", or "today 14:30" / "tomorrow 09:00".
            end: When it ends, in the same forms; optional.
            event_timezone: The IANA timezone the times are meant in, when the user said
                one (e.g. "Asia/Shanghai"); otherwise leave it out.
        """
        return await db_call(_create, context, title, start, end, event_timezone)

    return calendar_create


def _calendar_list_tool(context: ToolContext) -> Any:
    async def calendar_list(days: int = 7) -> dict[str, Any]:
        """List the user's events from now on.

        Args:
            days: How many days ahead to look (1 to 90).
        """
        return await db_call(_list, context, days)

    return calendar_list


def _calendar_update_tool(context: ToolContext) -> Any:
    async def calendar_update(
        event_id: int,
        title: str | None = None,
        start: str | None = None,
        event_timezone: str | None = None,
    ) -> dict[str, Any]:
        """Change an event's title or start time.

        Args:
            event_id: The event's id, as calendar_create or calendar_list gave it.
            title: The new title; optional.
            start: The new start, in the forms calendar_create takes; optional.
            event_timezone: The IANA timezone of the new start; optional.
        """
        return await db_call(_update, context, event_id, title, start, event_timezone)

    return calendar_update


def _calendar_delete_tool(context: ToolContext) -> Any:
    async def calendar_delete(event_id: int) -> dict[str, Any]:
        """Delete one of the user's events.

        Args:
            event_id: The event's id.
        """
        return await db_call(_delete, context, event_id)

    return calendar_delete


def _zone_for(context: ToolContext, explicit: str | None) -> str:
    zone = user_profile_settings(user_id=context.user_id).get("timezone")
    return resolve_event_timezone(
        explicit=explicit,
        client_time=context.client_time,
        profile_timezone=zone if isinstance(zone, str) else None,
    )


def _create(
    context: ToolContext, title: str, start: str, end: str | None, event_timezone: str | None
) -> dict[str, Any]:
    zone = _zone_for(context, event_timezone)
    now = reference_now(context.client_time)
    starts_at = resolve_local_time(start, zone=zone, now=now)
    ends_at = resolve_local_time(end, zone=zone, now=now) if end else None
    if ends_at is not None and ends_at < starts_at:
        raise CalendarToolError("end is before start")
    event = CalendarEvent.objects.create(
        owner_id=context.user_id,
        run_id=context.run_pk,
        title=title[:200],
        starts_at=starts_at,
        ends_at=ends_at,
        event_timezone=zone,
    )
    return {"id": event.pk, "status": "created", **_times(event)}


def _list(context: ToolContext, days: int) -> dict[str, Any]:
    if not 1 <= days <= 90:
        raise CalendarToolError("days must be between 1 and 90")
    now = reference_now(context.client_time)
    events = CalendarEvent.objects.filter(
        owner_id=context.user_id, starts_at__gte=now, starts_at__lt=now + timedelta(days=days)
    ).order_by("starts_at")[:50]
    return {
        "count": len(events),
        "events": [{"id": e.pk, "title": e.title, **_times(e)} for e in events],
    }


def _update(
    context: ToolContext,
    event_id: int,
    title: str | None,
    start: str | None,
    event_timezone: str | None,
) -> dict[str, Any]:
    event = CalendarEvent.objects.filter(pk=event_id, owner_id=context.user_id).first()
    if event is None:
        raise CalendarToolError(f"no event {event_id}")
    if title:
        event.title = title[:200]
    if start:
        event.event_timezone = _zone_for(context, event_timezone)
        now = reference_now(context.client_time)
        event.starts_at = resolve_local_time(start, zone=event.event_timezone, now=now)
    event.save()
    return {"id": event.pk, "status": "updated", **_times(event)}


def _delete(context: ToolContext, event_id: int) -> dict[str, Any]:
    deleted, _ = CalendarEvent.objects.filter(pk=event_id, owner_id=context.user_id).delete()
    if not deleted:
        raise CalendarToolError(f"no event {event_id}")
    return {"id": event_id, "status": "deleted"}


def _times(event: CalendarEvent) -> dict[str, str]:
    local = event.starts_at.astimezone(ZoneInfo(event.event_timezone))
    return {
        "starts_at_utc": event.starts_at.astimezone(UTC).isoformat(),
        "starts_at_local": local.isoformat(),
        "event_timezone": event.event_timezone,
    }
