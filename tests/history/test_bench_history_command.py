"""bench_history: it measures through the real view and leaves nothing behind."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agent_runs.models import Message, Thread

# VACUUM, which the seeding runs, cannot run inside the test's wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

TIMED = re.compile(r"^(view|select) +(.+): (\d+) messages; p50 [\d.]+ ms, p99 [\d.]+ ms")


def test_it_prints_latencies_for_the_latest_and_a_middle_day_and_cleans_up():
    out = io.StringIO()

    call_command("bench_history", messages=400, days=4, requests=3, stdout=out)

    timed = [match for line in out.getvalue().splitlines() if (match := TIMED.match(line))]
    assert [(match[1], match[2][:7]) for match in timed] == [
        ("view", "latest "),
        ("view", "before="),
        ("view", "latest "),
        ("select", "latest "),
        ("select", "before="),
    ]
    assert all(int(match[3]) > 0 for match in timed)
    assert not get_user_model().objects.filter(username="bench-history").exists()
    assert Thread.objects.count() == 0 and Message.objects.count() == 0
