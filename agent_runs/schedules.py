"""Automation jobs' schedules (docs/automations.md, Schedules): a 5-field cron expression read
in an IANA timezone. Pure: no ORM, no clock (each function takes the instant it reasons from).

The expression is read in the zone's wall-clock time, each wall-clock time firing once:
- a time the zone skips (the hour clocks jump in spring) fires at the end of the gap, the
  first wall-clock time that exists after it (02:30 in ``Europe/Berlin`` on the last Sunday
  of March fires at 03:00 CEST);
- a time the zone repeats (the hour clocks go back in autumn) fires at its first occurrence
  only (02:30 CEST, not again at 02:30 CET).
"""

import datetime
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import croniter

from agent_runs.run_input import iana_timezones

UTC = datetime.UTC
_MINUTE = datetime.timedelta(minutes=1)
# Wall-clock times looked at before a schedule is declared to fire never (``0 0 30 2 *``):
# croniter itself gives up after a few years of candidates.
_MAX_STEPS = 10_000
# A zone's gap is at most a few hours.
_MAX_GAP_MINUTES = 24 * 60


class ScheduleInvalid(ValueError):
    """A cron expression or a timezone this module cannot use; the message says why."""


@dataclass(frozen=True)
class DueTimes:
    """The fire times from one up to an instant: the first and latest of them, how many
    (``count``, at most ``limit`` counted), and the next fire time after the instant."""

    first: datetime.datetime
    latest: datetime.datetime
    count: int
    next_at: datetime.datetime | None


def schedule_check(expression: str) -> str:
    """The expression, its fields separated by single spaces; ``ScheduleInvalid`` unless it is
    5 cron fields that fire at some time (seconds and years, croniter's 6th and 7th fields,
    are refused)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleInvalid("a cron expression has 5 fields: minute hour day month weekday")
    normal = " ".join(fields)
    if not croniter.is_valid(normal):
        raise ScheduleInvalid(f"{normal!r} is not a valid cron expression")
    start = datetime.datetime(2000, 1, 1)
    try:
        croniter(normal, start).get_next(datetime.datetime)
    except Exception as exc:  # croniter's CroniterBadDateError and kin: it never fires
        raise ScheduleInvalid(f"{normal!r} never fires") from exc
    return normal


def zone_get(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ``ScheduleInvalid`` for a name that is not one."""
    if name not in iana_timezones():
        raise ScheduleInvalid(f"{name!r} is not an IANA timezone (such as Europe/Berlin)")
    return ZoneInfo(name)


def next_fire_time(
    *, expression: str, zone: ZoneInfo, after: datetime.datetime
) -> datetime.datetime | None:
    """The first fire time strictly after ``after`` (aware), in UTC; ``None`` if it never
    fires again."""
    local = after.astimezone(zone).replace(tzinfo=None)
    # Start a minute back: the first candidate may be this very minute, before ``after``
    # or (in a repeated hour) a wall-clock time whose first occurrence has passed.
    times = croniter(expression, local - _MINUTE)
    for _ in range(_MAX_STEPS):
        try:
            wall = times.get_next(datetime.datetime)
        except Exception:  # no time left (a date that never comes again)
            return None
        instant = _instant(wall, zone)
        if instant > after:
            return instant
    return None


def due_times(
    *,
    expression: str,
    zone: ZoneInfo,
    first: datetime.datetime,
    now: datetime.datetime,
    limit: int = 1000,
) -> DueTimes:
    """The fire times from ``first`` (a fire time, due: ``first <= now``) up to ``now``,
    and the next one after ``now``. Beyond ``limit`` times the count stops and the latest
    is found by a jump (a job down for months is not walked minute by minute)."""
    latest, count = first, 1
    following = next_fire_time(expression=expression, zone=zone, after=first)
    while following is not None and following <= now and count < limit:
        latest, count = following, count + 1
        following = next_fire_time(expression=expression, zone=zone, after=following)
    if following is not None and following <= now:
        latest = _latest_up_to(expression=expression, zone=zone, now=now, floor=latest)
        following = next_fire_time(expression=expression, zone=zone, after=now)
    return DueTimes(first=first, latest=latest, count=count, next_at=following)


def _latest_up_to(
    *, expression: str, zone: ZoneInfo, now: datetime.datetime, floor: datetime.datetime
) -> datetime.datetime:
    """The latest fire time at or before ``now`` (no earlier than ``floor``)."""
    local = now.astimezone(zone).replace(tzinfo=None)
    times = croniter(expression, local + _MINUTE)
    for _ in range(_MAX_STEPS):
        instant = _instant(times.get_prev(datetime.datetime), zone)
        if instant <= now:
            return max(instant, floor)
    return floor


def _instant(wall: datetime.datetime, zone: ZoneInfo) -> datetime.datetime:
    """The UTC instant of the wall-clock time ``wall`` in ``zone``: its first occurrence
    (``fold=0``); for a time the zone skips, the end of the gap."""
    for _ in range(_MAX_GAP_MINUTES):
        if _exists(wall, zone):
            return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
        wall = (wall + _MINUTE).replace(second=0, microsecond=0)
    raise ScheduleInvalid(f"no wall-clock time after {wall} exists in {zone.key}")


def _exists(wall: datetime.datetime, zone: ZoneInfo) -> bool:
    return wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall
