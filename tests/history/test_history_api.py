"""GET /api/v1/agent/history: day snapshots in the user's timezone, paging, visibility, access."""

import uuid

import pytest

from agent_runs.models import Thread, Visibility
from tests.history.conftest import add_message, profile_set

pytestmark = pytest.mark.django_db

HISTORY = "/api/v1/agent/history"


def history(client, **query):
    return client.get(HISTORY, query)


def seqs(body):
    return [message["seq"] for message in body["messages"]]


def test_it_answers_the_latest_day_of_the_thread_in_seq_order(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-14T09:00:00+00:00", content="earlier day")
    add_message(thread, "2026-03-15T10:00:05+00:00", content="帮我创建一个日程")
    add_message(thread, "2026-03-15T10:00:00+00:00", role="assistant", content="好的")

    response = history(alice, threadId=str(thread.id))

    assert response.status_code == 200
    body = response.json()
    assert body["scope"] == "history_day"
    assert body["threadId"] == str(thread.id)
    assert body["day"] == "2026-03-15"
    assert body["hasMore"] is True
    assert seqs(body) == [2, 3]  # seq order, although seq 3 was stored a little earlier
    user, assistant = body["messages"]
    assert user == {
        "id": "msg-2",
        "seq": 2,
        "role": "user",
        "content": "帮我创建一个日程",
        "attachments": [],
        "timestamp": "2026-03-15T10:00:05.000Z",
    }
    assert assistant == {
        "id": "msg-3",
        "seq": 3,
        "role": "assistant",
        "content": "好的",
        "ui_schema": None,
        "timestamp": "2026-03-15T10:00:00.000Z",
    }


def test_a_message_at_2330_utc_is_on_the_next_day_for_a_user_in_shanghai(alice, alice_user):
    profile_set(alice_user, timezone="Asia/Shanghai")
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-14T15:30:00+00:00")  # 23:30 on the 14th in Shanghai
    add_message(thread, "2026-03-14T23:30:00+00:00")  # 07:30 on the 15th in Shanghai

    latest = history(alice).json()
    earlier = history(alice, before="2026-03-15").json()

    assert (latest["day"], seqs(latest), latest["hasMore"]) == ("2026-03-15", [2], True)
    assert (earlier["day"], seqs(earlier), earlier["hasMore"]) == ("2026-03-14", [1], False)


def test_the_same_messages_are_one_day_for_a_user_without_a_timezone(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-14T15:30:00+00:00")
    add_message(thread, "2026-03-14T23:30:00+00:00")

    body = history(alice).json()

    assert (body["day"], seqs(body), body["hasMore"]) == ("2026-03-14", [1, 2], False)


def test_a_user_west_of_utc_sees_an_early_utc_message_on_the_previous_day(alice, alice_user):
    profile_set(alice_user, timezone="America/New_York")
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-15T02:00:00+00:00")  # 22:00 on the 14th in New York
    add_message(thread, "2026-03-15T04:30:00+00:00")  # 00:30 on the 15th

    latest = history(alice).json()

    assert (latest["day"], seqs(latest), latest["hasMore"]) == ("2026-03-15", [2], True)
    assert history(alice, before="2026-03-15").json()["day"] == "2026-03-14"


def test_a_day_that_a_dst_change_shortens_holds_exactly_its_23_hours(alice, alice_user):
    profile_set(alice_user, timezone="America/New_York")  # 2026-03-08 02:00 EST -> 03:00 EDT
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-08T04:59:00+00:00")  # 23:59 on the 7th (EST)
    add_message(thread, "2026-03-08T05:00:00+00:00")  # 00:00 on the 8th (EST)
    add_message(thread, "2026-03-09T03:59:00+00:00")  # 23:59 on the 8th (EDT)
    add_message(thread, "2026-03-09T04:00:00+00:00")  # 00:00 on the 9th (EDT)

    body = history(alice, before="2026-03-09").json()

    assert (body["day"], seqs(body), body["hasMore"]) == ("2026-03-08", [2, 3], True)


def test_an_unknown_profile_timezone_counts_days_in_utc(alice, alice_user):
    profile_set(alice_user, timezone="Mars/Olympus_Mons")
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-14T23:30:00+00:00")

    assert history(alice).json()["day"] == "2026-03-14"


def test_before_pages_back_over_empty_days_to_the_first_day(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-01T08:00:00+00:00")
    add_message(thread, "2026-03-01T08:01:00+00:00", role="assistant")
    add_message(thread, "2026-03-10T08:00:00+00:00")
    add_message(thread, "2026-03-12T08:00:00+00:00")

    pages = []
    query: dict[str, str] = {"threadId": str(thread.id)}
    while True:
        body = history(alice, **query).json()
        pages.append((body["day"], seqs(body), body["hasMore"]))
        if not body["hasMore"]:
            break
        query["before"] = body["day"]
    past_the_first = history(alice, threadId=str(thread.id), before="2026-03-01").json()

    assert pages == [
        ("2026-03-12", [4], True),
        ("2026-03-10", [3], True),
        ("2026-03-01", [1, 2], False),
    ]
    assert past_the_first == {
        "scope": "history_day",
        "threadId": str(thread.id),
        "day": None,
        "hasMore": False,
        "messages": [],
    }


def test_before_a_later_date_answers_the_latest_day_before_it(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-01T08:00:00+00:00")
    add_message(thread, "2026-03-10T08:00:00+00:00")

    assert history(alice, before="2026-03-11").json()["day"] == "2026-03-10"
    assert history(alice, before="2026-03-10").json()["day"] == "2026-03-01"


def test_only_messages_visible_to_ui_history_are_shown(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-15T10:00:00+00:00")
    add_message(thread, "2026-03-15T10:00:01+00:00", mask=int(Visibility.CONTEXT))
    add_message(thread, "2026-03-15T10:00:02+00:00", role="tool", mask=int(Visibility.ALL))
    add_message(thread, "2026-03-15T10:00:03+00:00", role="system")
    add_message(
        thread,
        "2026-03-15T10:00:04+00:00",
        role="assistant",
        mask=int(Visibility.UI_HISTORY | Visibility.WORKER),
    )

    body = history(alice).json()

    assert seqs(body) == [1, 5]
    assert [message["role"] for message in body["messages"]] == ["user", "assistant"]


def test_a_model_s_reasoning_is_hidden_unless_the_caller_includes_it(alice, alice_user):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-15T10:00:00+00:00", content="Hi")
    add_message(
        thread,
        "2026-03-15T10:00:01+00:00",
        role="assistant",
        content="The user greets me.",
        mask=int(Visibility.REASONING),
        metadata={"stage": "worker", "reasoning": True},
    )
    add_message(thread, "2026-03-15T10:00:01+00:00", role="assistant", content="Hello!")

    hidden = history(alice, threadId=str(thread.id)).json()
    shown = history(alice, threadId=str(thread.id), include="reasoning").json()

    assert [m["content"] for m in hidden["messages"]] == ["Hi", "Hello!"]
    assert [m["role"] for m in shown["messages"]] == ["user", "reasoning", "assistant"]
    assert shown["messages"][1] == {
        "id": "msg-2",
        "seq": 2,
        "role": "reasoning",
        "content": "The user greets me.",
        "stage": "worker",
        "timestamp": "2026-03-15T10:00:01.000Z",
    }
    assert shown["messages"][2] == hidden["messages"][1]  # the answer as it always is


@pytest.mark.parametrize("include", ["", "reasoning,tools", "tools", "Reasoning"])
def test_an_include_other_than_reasoning_is_a_422(alice, include):
    response = history(alice, include=include)

    assert response.status_code == 422
    assert response.json() == {"detail": 'include must be "reasoning"'}


def test_days_with_only_hidden_messages_are_skipped_and_do_not_count_for_has_more(
    alice, alice_user
):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-01T10:00:00+00:00", role="tool")
    add_message(thread, "2026-03-02T10:00:00+00:00")
    add_message(thread, "2026-03-03T10:00:00+00:00", mask=int(Visibility.CONTEXT))

    body = history(alice).json()

    assert (body["day"], seqs(body), body["hasMore"]) == ("2026-03-02", [2], False)


def test_a_caller_without_messages_gets_an_empty_snapshot(alice, alice_user):
    Thread.objects.create(owner=alice_user)  # a thread, but nothing visible in it

    response = history(alice)

    assert response.status_code == 200
    assert response.json() == {
        "scope": "history_day",
        "threadId": None,
        "day": None,
        "hasMore": False,
        "messages": [],
    }


def test_without_thread_id_it_answers_the_thread_with_the_latest_visible_message(
    alice, alice_user, bob_user
):
    older = Thread.objects.create(owner=alice_user)
    latest = Thread.objects.create(owner=alice_user)
    hidden_only = Thread.objects.create(owner=alice_user)
    bobs = Thread.objects.create(owner=bob_user)
    add_message(latest, "2026-03-10T08:00:00+00:00")
    add_message(older, "2026-03-09T08:00:00+00:00")  # created later, but older messages
    older.save()  # and touched last
    add_message(hidden_only, "2026-03-11T08:00:00+00:00", role="tool")
    add_message(bobs, "2026-03-12T08:00:00+00:00")

    body = history(alice).json()

    assert body["threadId"] == str(latest.id)
    assert body["day"] == "2026-03-10"


def test_an_assistant_message_carries_its_compiled_ui_schema_in_the_profile_locale(
    alice, alice_user
):
    profile_set(alice_user, locale="zh-CN")
    thread = Thread.objects.create(owner=alice_user)
    agent_output = {
        "answer": "好的,我来帮您创建日程。",
        "status": "success",
        "suggested_actions": [],
        "ui_hints": {
            "appearance": "card",
            "title": "日程已创建",
            "blocks": [{"type": "text", "content": "您的会议日程创建成功", "role": "body"}],
        },
    }
    add_message(
        thread,
        "2026-03-15T10:00:05+00:00",
        role="assistant",
        content="好的,我来帮您创建日程。",
        metadata={"agent_output": agent_output},
    )
    add_message(
        thread,
        "2026-03-15T10:00:06+00:00",
        role="assistant",
        metadata={"agent_output": {"status": "success", "ui_hints": "not hints"}},
    )

    first, second = history(alice).json()["messages"]

    assert first["ui_schema"] == {  # the spec's example
        "version": "2.0",
        "locale": "zh-CN",
        "status": "success",
        "theme": "default",
        "root": {
            "type": "stack",
            "appearance": "card",
            "children": [
                {"type": "text", "content": "日程已创建", "role": "title"},
                {"type": "badge", "label": "SUCCESS", "status": "success"},
                {"type": "text", "content": "您的会议日程创建成功", "role": "body"},
            ],
        },
    }
    assert second["ui_schema"] is None


def test_the_number_of_queries_does_not_grow_with_the_thread(
    alice, alice_user, django_assert_max_num_queries
):
    thread = Thread.objects.create(owner=alice_user)
    for day in range(1, 21):
        for minute in range(5):
            add_message(thread, f"2026-03-{day:02d}T08:{minute:02d}:00+00:00")

    history(alice)  # the token's first use also records last_used_at
    # the token, the latest thread with the profile, the day, its messages, an earlier day
    with django_assert_max_num_queries(5):
        body = history(alice, before="2026-03-10").json()

    assert (body["day"], len(body["messages"]), body["hasMore"]) == ("2026-03-09", 5, True)


@pytest.mark.parametrize(
    "before", ["2026-02-30", "2026-3-5", "20260315", "2026-W11", "yesterday", "", "2026-03-15\n"]
)
def test_a_before_that_is_not_a_calendar_date_is_a_422(alice, before):
    response = history(alice, before=before)

    assert response.status_code == 422
    assert response.json() == {"detail": "before must be a calendar date in YYYY-MM-DD format"}


@pytest.mark.parametrize("thread_id", ["not-a-uuid", "", "123"])
def test_a_thread_id_that_is_not_a_uuid_is_a_422(alice, thread_id):
    response = history(alice, threadId=thread_id)

    assert response.status_code == 422
    assert response.json() == {"detail": "threadId must be a valid UUID"}


def test_a_strangers_thread_is_a_404(alice_user, bob):
    thread = Thread.objects.create(owner=alice_user)
    add_message(thread, "2026-03-15T10:00:00+00:00", content="alice's secret")

    response = history(bob, threadId=str(thread.id))

    assert response.status_code == 404
    assert "secret" not in response.content.decode()


def test_a_thread_that_does_not_exist_is_a_404(alice):
    assert history(alice, threadId=str(uuid.uuid4())).status_code == 404


def test_an_anonymous_caller_is_refused(client):
    response = client.get(HISTORY)

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
