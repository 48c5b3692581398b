"""Benchmark: ``GET /api/v1/agent/history`` on a thread with 100,000 messages over 1,000 days.

It seeds a throwaway user and thread (bulk inserts), then times the real request path in
process with Django's test ``Client``: URL routing, DRF bearer-token authentication, the
query parsing, the selector's queries, the UI-schema compiler, attachment signing and JSON
rendering; no socket. It prints p50/p99 for the latest day and for ``before`` a day in the
middle, and the same for the selector plus serialisation alone. Everything it made is deleted
at the end, also when it fails.
"""

import statistics
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.test import Client

from agent_runs.benchmarks import cpu_reference_ms
from agent_runs.models import Message, Thread, UserProfile, Visibility
from agent_runs.services.tokens import api_token_create
from history.selectors import history_snapshot_get

_USERNAME = "bench-history"
_TIMEZONE = "Asia/Shanghai"
_AGENT_OUTPUT = {
    "answer": "Done.",
    "key_points": ["one", "two"],
    "result_type": "execution_report",
    "status": "success",
    "suggested_actions": [{"label": "Next", "prompt": "What next?"}, "Show my week"],
    "ui_hints": {
        "appearance": "card",
        "title": "Event created",
        "blocks": [
            {"type": "text", "content": "Your meeting is on the calendar.", "role": "body"},
            {"type": "key_value", "items": [{"key": "When", "value": "10:00"}]},
            {"type": "list", "items": ["Room 4", "Video link sent"]},
            {"type": "divider"},
        ],
    },
}
_ATTACHMENTS = [
    {"bucket": "agent-files", "path": "agent-inputs/bench/a.jpg", "mime_type": "image/jpeg"}
]


class Command(BaseCommand):
    help = "Seed a long thread and print history latency p50/p99 (deletes what it seeded)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--messages", type=int, default=100_000)
        parser.add_argument("--days", type=int, default=1_000)
        parser.add_argument("--requests", type=int, default=300, help="timed requests a case")

    def handle(self, *args: Any, **options: Any) -> None:
        messages, days = options["messages"], options["days"]
        if messages < days or days < 2:
            raise CommandError("need at least 2 days and a message a day")
        if get_user_model().objects.filter(username=_USERNAME).exists():
            raise CommandError(f"user {_USERNAME!r} exists: a previous run did not clean up")
        token = api_token_create(username=_USERNAME)
        user = get_user_model().objects.get(username=_USERNAME)
        try:
            started = time.perf_counter()
            thread, first = _seed(user, messages=messages, days=days)
            self.stdout.write(
                f"seeded {messages} messages over {days} days in "
                f"{time.perf_counter() - started:.1f} s (profile timezone {_TIMEZONE})"
            )
            middle = (first + timedelta(days=days // 2)).astimezone(ZoneInfo(_TIMEZONE)).date()
            self._measure(user, token, thread, middle, options["requests"])
        finally:
            started = time.perf_counter()
            get_user_model().objects.filter(pk=user.pk).delete()  # cascades to everything
            self.stdout.write(f"cleaned up in {time.perf_counter() - started:.1f} s")

    def _measure(self, user: Any, token: str, thread: Thread, middle: date, count: int) -> None:
        host = next((h for h in settings.ALLOWED_HOSTS if "*" not in h), "localhost")
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST=host.lstrip("."))
        cases: dict[str, dict[str, str]] = {
            "latest day": {"threadId": str(thread.id)},
            f"before={middle}": {"threadId": str(thread.id), "before": middle.isoformat()},
            "latest day, latest thread (no threadId)": {},
        }
        for name, query in cases.items():

            def request(query: dict[str, str] = query) -> Any:
                response = client.get("/api/v1/agent/history", query)
                if response.status_code != 200:
                    raise CommandError(f"{response.status_code}: {response.content[:300]!r}")
                return response

            self._report(f"view   {name}", request, count)

        for name, before in (("latest day", None), (f"before={middle}", middle)):

            def select(before: date | None = before) -> dict[str, Any]:
                snapshot = history_snapshot_get(user=user, thread_id=thread.id, before=before)
                return snapshot.to_wire()

            self._report(f"select {name}", select, count)

    def _report(self, name: str, call: Callable[[], Any], count: int) -> None:
        for _ in range(min(20, count)):  # warm up connections and caches
            call()
        timings, cpu = [], []
        for _ in range(count):
            started, started_cpu = time.perf_counter(), time.process_time()
            result = call()
            timings.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        # Parsing the client's copy of the answer is not the server's time: done once, here.
        shown = len((result if isinstance(result, dict) else result.json())["messages"])
        timings.sort()
        # This process's CPU time tells waiting (wall >> CPU) from work; the CPU reference,
        # how fast this (possibly shared) CPU was just then.
        self.stdout.write(
            f"{name}: {shown} messages; p50 {statistics.median(timings):.2f} ms, "
            f"p99 {timings[min(len(timings) - 1, round(0.99 * (len(timings) - 1)))]:.2f} ms "
            f"(CPU p50 {statistics.median(cpu):.2f} ms; {count} requests; "
            f"CPU reference {cpu_reference_ms():.0f} ms)"
        )


def _seed(user: Any, *, messages: int, days: int) -> tuple[Thread, datetime]:
    """A thread of ``messages`` evenly spread over ``days`` days ending now: user and assistant
    turns, every tenth message a tool result (hidden from history), every fourth assistant
    message with ``ui_hints``, every twentieth user message with an attachment."""
    UserProfile.objects.update_or_create(user=user, defaults={"settings": {"timezone": _TIMEZONE}})
    thread = Thread.objects.create(owner=user, last_seq=messages)
    batch: list[Message] = []
    for seq in range(1, messages + 1):
        batch.append(_message(thread, seq))
        if len(batch) == 5_000:
            Message.objects.bulk_create(batch)
            batch = []
    Message.objects.bulk_create(batch)
    # created_at is auto_now_add, so bulk_create stamps "now": spread the rows in one UPDATE.
    first = datetime.now(UTC) - timedelta(days=days)
    step = timedelta(seconds=days * 86_400 / messages)
    Message.objects.filter(thread=thread).update(
        created_at=ExpressionWrapper(
            Value(first) + Value(step) * (F("seq") - 1), output_field=DateTimeField()
        )
    )
    # The UPDATE left 100,000 dead row versions (and their index entries) stamped "now", right
    # where the latest-day query starts: vacuum them away, as autovacuum soon would, and give
    # the planner fresh statistics.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Message._meta.db_table}")
    return thread, first


def _message(thread: Thread, seq: int) -> Message:
    if seq % 10 == 0:
        return Message(
            thread=thread,
            seq=seq,
            message_id=f"tool-{seq}",
            role=Message.Role.TOOL,
            content='{"ok": true}',
            metadata={"tool_name": "calendar_create"},
            visibility_mask=int(Visibility.CONTEXT),
        )
    if seq % 2:
        return Message(
            thread=thread,
            seq=seq,
            message_id=f"msg-{seq}",
            role=Message.Role.USER,
            content=f"Please add meeting number {seq} to my calendar.",
            metadata={"user_message_attachments": _ATTACHMENTS} if seq % 40 == 1 else {},
        )
    return _assistant_message(thread, seq)


def _assistant_message(thread: Thread, seq: int) -> Message:
    metadata: dict[str, Any] = {"run_id": f"run-{seq}", "stage": "worker"}
    if seq % 8 == 2:
        metadata["agent_output"] = _AGENT_OUTPUT
    return Message(
        thread=thread,
        seq=seq,
        message_id=f"msg-{seq}",
        role=Message.Role.ASSISTANT,
        content=f"Meeting {seq} is on your calendar. " * 5,
        metadata=metadata,
    )
