"""Schedules without a database: cron expressions read in an IANA timezone, DST-correct."""

import datetime

import pytest

from agent_runs.schedules import (
    ScheduleInvalid,
    due_times,
    next_fire_time,
    schedule_check,
    zone_get,
)

UTC = datetime.UTC
BERLIN = zone_get("Europe/Berlin")


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0):
    return datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def following(expression: str, after: datetime.datetime, count: int) -> list[datetime.datetime]:
    times: list[datetime.datetime] = []
    for _ in range(count):
        found = next_fire_time(expression=expression, zone=BERLIN, after=after)
        assert found is not None
        times.append(after := found)
    return times


def test_a_daily_time_follows_the_wall_clock_across_both_dst_changes():
    # 09:00 in Berlin: 08:00 UTC in winter (CET), 07:00 UTC in summer (CEST).
    assert following("0 9 * * *", at(2026, 3, 27, 12), 3) == [
        at(2026, 3, 28, 8),
        at(2026, 3, 29, 7),
        at(2026, 3, 30, 7),
    ]
    assert following("0 9 * * *", at(2026, 10, 24, 12), 2) == [
        at(2026, 10, 25, 8),
        at(2026, 10, 26, 8),
    ]


def test_a_time_the_spring_change_skips_fires_once_at_the_end_of_the_gap():
    # 2026-03-29: Berlin's clocks jump from 02:00 CET to 03:00 CEST (01:00 UTC).
    assert following("30 2 * * *", at(2026, 3, 28, 12), 2) == [
        at(2026, 3, 29, 1, 0),  # 03:00 CEST
        at(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]
    # Every quarter hour: the four times of the skipped hour are one, at 03:00 CEST.
    assert following("*/15 * * * *", at(2026, 3, 29, 0, 40), 3) == [
        at(2026, 3, 29, 0, 45),  # 01:45 CET
        at(2026, 3, 29, 1, 0),  # 03:00 CEST
        at(2026, 3, 29, 1, 15),  # 03:15 CEST
    ]


def test_a_time_the_autumn_change_repeats_fires_at_its_first_occurrence_only():
    # 2026-10-25: Berlin's clocks go back from 03:00 CEST to 02:00 CET (01:00 UTC).
    assert following("30 2 * * *", at(2026, 10, 24, 12), 2) == [
        at(2026, 10, 25, 0, 30),  # 02:30 CEST; not again at 02:30 CET (01:30 UTC)
        at(2026, 10, 26, 1, 30),  # 02:30 CET
    ]
    # From inside the repeated hour, the wall-clock times already fired are not again.
    assert next_fire_time(
        expression="30 2 * * *", zone=BERLIN, after=at(2026, 10, 25, 1, 10)
    ) == at(2026, 10, 26, 1, 30)


def test_due_times_counts_every_time_up_to_now_and_gives_the_next():
    due = due_times(
        expression="*/5 * * * *", zone=BERLIN, first=at(2026, 1, 1, 0, 0), now=at(2026, 1, 1, 0, 12)
    )
    assert (due.first, due.latest, due.count) == (at(2026, 1, 1, 0, 0), at(2026, 1, 1, 0, 10), 3)
    assert due.next_at == at(2026, 1, 1, 0, 15)


def test_due_times_of_a_long_outage_stop_counting_but_find_the_latest():
    due = due_times(
        expression="* * * * *",
        zone=BERLIN,
        first=at(2026, 1, 1),
        now=at(2026, 3, 1, 0, 0, 30),
        limit=100,
    )
    assert due.count == 100
    assert due.latest == at(2026, 3, 1, 0, 0)
    assert due.next_at == at(2026, 3, 1, 0, 1)


def test_an_expression_is_kept_in_its_normal_form():
    assert schedule_check("  0  9 * *   1-5 ") == "0 9 * * 1-5"


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("* * * *", "5 fields"),
        ("* * * * * *", "5 fields"),  # croniter's seconds are refused
        ("61 * * * *", "not a valid cron expression"),
        ("a b c d e", "not a valid cron expression"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_it_refuses_a_bad_expression(expression, problem):
    with pytest.raises(ScheduleInvalid, match=problem):
        schedule_check(expression)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "CEST", "europe/berlin"])
def test_it_refuses_a_name_that_is_not_an_iana_zone(name):
    with pytest.raises(ScheduleInvalid, match="not an IANA timezone"):
        zone_get(name)
