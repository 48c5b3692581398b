"""The threads-and-runs REST endpoints (docs/protocols/agui.md, Threads and runs): the shapes,
keyset pages, activity order, strangers' 404s, and a thread's deletion (what goes, what
stays: its usage records), cancelling its queued or running runs first."""

import base64
import json
import uuid
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rq.job import Job, JobStatus

from agent_runs.events.emitter import redis_client, stream_key
from agent_runs.models import CalendarEvent, Message, Run, RunEvent, Thread
from agent_runs.services import threads as thread_services
from agent_runs.services.lifecycle import run_cancel
from attachments.models import Attachment
from billing.models import UsageRecord
from billing.selectors import costs_report
from tests.billing.conftest import DEEPSEEK_COST, DEEPSEEK_METADATA, price_entry
from tests.conftest import post_run, run_input, send, start_worker, stop_process, wait_for
from tests.conftest import work_burst as run_jobs
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

THREADS = "/api/v1/agent/threads"
DEEPSEEK = "deepseek/deepseek-chat"


def new_thread(client, runs=1, **overrides):
    """A thread of ``runs`` queued runs (run-1, run-2, …); its threadId."""
    thread_id = str(uuid.uuid4())
    for number in range(1, runs + 1):
        response = post_run(client, run_input(threadId=thread_id, runId=f"run-{number}"))
        assert response.status_code == 202, response.content
    return thread_id


def pages(client, url, key, **query):
    """Every page of a list, following ``next``; the pages' items."""
    found = []
    cursor = None
    while True:
        params = {**query, **({"cursor": cursor} if cursor else {})}
        response = client.get(url, params)
        assert response.status_code == 200, response.content
        found.append(response.json()[key])
        cursor = response.json()["next"]
        if cursor is None:
            return found


def cursor_of(parts):
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode()


def delete(client, thread_id):
    return send(lambda: client.delete(f"{THREADS}/{thread_id}"))


# Reads --------------------------------------------------------------------------------------


def test_the_thread_list_shows_each_thread_with_its_latest_run(alice, bob, redis_queue):
    older = new_thread(alice)
    newer = new_thread(alice, runs=2)
    new_thread(bob)

    body = alice.get(THREADS).json()

    assert body["next"] is None
    assert [thread["threadId"] for thread in body["threads"]] == [newer, older]
    first = body["threads"][0]
    assert set(first) == {"threadId", "title", "createdAt", "updatedAt", "latestRun"}
    run_2 = Run.objects.get(thread_id=newer, run_id="run-2")
    assert first["latestRun"] == {
        "runId": "run-2",
        "status": "queued",
        "createdAt": run_2.created_at.isoformat().replace("+00:00", "Z"),
        "finishedAt": None,
        "automationJob": None,
    }


def test_a_thread_s_title_is_the_start_of_its_first_user_message(alice, redis_queue):
    thread_id = str(uuid.uuid4())
    said = ["Plan my week " + "and more " * 20, "Now only Tuesday"]
    for number, text in enumerate(said, start=1):
        message = {"id": f"msg-{number}", "role": "user", "content": text}
        body = run_input(threadId=thread_id, runId=f"run-{number}", messages=[message])
        assert post_run(alice, body).status_code == 202

    [listed] = alice.get(THREADS).json()["threads"]
    detail = alice.get(f"{THREADS}/{thread_id}").json()

    assert listed["title"] == said[0][:80] and len(said[0]) > 80
    assert detail["title"] == listed["title"]


def test_a_thread_without_runs_has_no_latest_run(alice, alice_token):
    from django.contrib.auth import get_user_model

    alice_user = get_user_model().objects.get(username="alice")
    thread = Thread.objects.create(owner=alice_user)

    [listed] = alice.get(THREADS).json()["threads"]
    detail = alice.get(f"{THREADS}/{thread.pk}").json()

    assert listed["latestRun"] is None and listed["title"] is None
    assert detail["latestRun"] is None and detail["runCount"] == 0


def test_threads_are_listed_by_latest_activity_and_a_run_that_ends_counts(alice, redis_queue):
    first = new_thread(alice)
    second = new_thread(alice)
    assert [t["threadId"] for t in alice.get(THREADS).json()["threads"]] == [second, first]

    run_cancel(run=Run.objects.get(thread_id=first))  # the first thread's run ends

    listed = alice.get(THREADS).json()["threads"]
    assert [t["threadId"] for t in listed] == [first, second]
    finished_at = Run.objects.get(thread_id=first).finished_at
    assert finished_at is not None
    assert listed[0]["updatedAt"] == finished_at.isoformat().replace("+00:00", "Z")
    assert listed[0]["latestRun"]["status"] == "cancelled"


def test_a_completed_run_moves_its_thread_up_too(alice, redis_queue):
    first = new_thread(alice)
    second = new_thread(alice)
    Run.objects.filter(thread_id=second).update(status=Run.Status.COMPLETED)  # not this one's job

    run_jobs(redis_queue)  # the demo model completes the first thread's run

    run = Run.objects.get(thread_id=first)
    assert run.status == Run.Status.COMPLETED and run.finished_at is not None
    listed = alice.get(THREADS).json()["threads"]
    assert [t["threadId"] for t in listed] == [first, second]
    assert listed[0]["updatedAt"] == run.finished_at.isoformat().replace("+00:00", "Z")


def test_thread_pages_follow_the_cursor_without_repeating_a_thread(alice, redis_queue):
    threads = [new_thread(alice) for _ in range(5)]
    # Three share one instant: the id decides between them.
    same = timezone.now()
    Thread.objects.filter(pk__in=threads[1:4]).update(updated_at=same)

    found = pages(alice, THREADS, "threads", limit=2)

    assert [len(page) for page in found] == [2, 2, 1]
    ids = [thread["threadId"] for page in found for thread in page]
    expected = Thread.objects.order_by("-updated_at", "-id").values_list("id", flat=True)
    assert ids == [str(thread_id) for thread_id in expected]
    assert sorted(ids) == sorted(threads)


def test_a_page_of_threads_is_one_query(alice, redis_queue):
    for _ in range(4):
        new_thread(alice, runs=2)
    alice.get(THREADS)  # the token's last use is written once, not on every call

    with CaptureQueriesContext(connection) as queries:
        body = alice.get(THREADS, {"limit": 3}).json()

    assert len(body["threads"]) == 3 and body["next"]
    thread_queries = [q for q in queries.captured_queries if "agent_runs_thread" in q["sql"]]
    assert len(thread_queries) == 1, [q["sql"] for q in queries.captured_queries]


def test_the_thread_detail_counts_its_runs(alice, redis_queue):
    thread_id = new_thread(alice, runs=3)

    body = alice.get(f"{THREADS}/{thread_id}").json()

    assert body["threadId"] == thread_id and body["runCount"] == 3
    assert body["latestRun"]["runId"] == "run-3"


def test_a_threads_runs_are_listed_newest_first_a_page_at_a_time(alice, redis_queue):
    thread_id = new_thread(alice, runs=5)
    new_thread(alice, runs=2)  # another thread's runs are not listed
    run_cancel(run=Run.objects.get(thread_id=thread_id, run_id="run-1"))

    found = pages(alice, f"{THREADS}/{thread_id}/runs", "runs", limit=2)

    runs = [run for page in found for run in page]
    assert [run["runId"] for run in runs] == ["run-5", "run-4", "run-3", "run-2", "run-1"]
    assert [len(page) for page in found] == [2, 2, 1]
    assert set(runs[0]) == {
        "threadId",
        "runId",
        "parentRunId",
        "status",
        "runtimeMode",
        "createdAt",
        "startedAt",
        "finishedAt",
        "errorCode",
        "automationJob",
    }
    assert runs[0]["status"] == "queued" and runs[0]["errorCode"] is None
    assert runs[0]["automationJob"] is None
    assert runs[0]["parentRunId"] is None and runs[0]["runtimeMode"] == "chat"


def test_the_run_detail_answers_its_status_times_and_empty_usage(alice, redis_queue):
    body = run_input(parentRunId="run-0")
    post_run(alice, body)

    detail = alice.get(f"/api/v1/agent/runs/{body['runId']}").json()

    assert detail["threadId"] == body["threadId"] and detail["runId"] == body["runId"]
    assert detail["parentRunId"] == "run-0" and detail["status"] == "queued"
    assert detail["startedAt"] is None and detail["finishedAt"] is None
    assert detail["errorCode"] is None
    assert detail["usage"]["totalTokens"] == 0 and detail["usage"]["modelCalls"] == 0
    assert detail["cost"] == {
        "amount": "0",
        "currency": "USD",
        "costSource": "catalog_fallback",
        "unpricedCalls": 0,
    }


def test_a_cancelled_run_answers_its_public_error_code_never_its_cause(alice, redis_queue):
    body = run_input()
    post_run(alice, body)
    run_cancel(run=Run.objects.get(run_id=body["runId"]))
    Run.objects.filter(run_id=body["runId"]).update(error="Traceback: a secret path")
    run_jobs(redis_queue)  # its turn comes: its journal is written

    detail = alice.get(f"/api/v1/agent/runs/{body['runId']}").json()

    assert detail["status"] == "cancelled" and detail["errorCode"] == "cancelled"
    assert "secret" not in json.dumps(detail)


def test_a_run_id_of_several_threads_needs_its_thread(alice, redis_queue):
    first = run_input(runId="same")
    post_run(alice, first)
    post_run(alice, run_input(runId="same"))

    ambiguous = alice.get("/api/v1/agent/runs/same")
    chosen = alice.get("/api/v1/agent/runs/same", {"threadId": first["threadId"]})

    assert ambiguous.status_code == 409
    assert ambiguous.json() == {"detail": "runId is used in several threads: pass threadId"}
    assert chosen.status_code == 200 and chosen.json()["threadId"] == first["threadId"]
    assert alice.get("/api/v1/agent/runs/same", {"threadId": "nope"}).status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"limit": "٣"},  # a digit, but not an ASCII one
        {"cursor": "not a cursor"},
        {"cursor": "r1795755578000000.12"},  # another list's
        {"cursor": f"t1795755578000000.{uuid.uuid4()}"},  # a UUID with its dashes
        {"cursor": f"t17957555780000000.{uuid.uuid4().hex}"},  # a time too far
        {"cursor": f"t-1.{uuid.uuid4().hex}"},
        {"cursor": "t1795755578000000.not-a-uuid"},
        {"cursor": f"t1795755578000000.{uuid.uuid4().hex}\n"},
        # An earlier release's (base64 JSON).
        {"cursor": cursor_of(["thread", "2026-11-23T00:00:00+00:00", str(uuid.uuid4())])},
        {"cursor": "W" * 5000},
    ],
)
def test_a_bad_limit_or_cursor_is_a_400_that_says_which(alice, query):
    response = alice.get(THREADS, query)

    assert response.status_code == 400
    name = next(iter(query))
    assert response.json()["detail"].startswith(f"{name} ")


def test_any_cursor_of_the_documented_form_is_a_place_in_the_list(alice, redis_queue):
    thread_id = new_thread(alice)
    some_thread = uuid.uuid4().hex
    runs = f"{THREADS}/{thread_id}/runs"

    before_everything = alice.get(THREADS, {"cursor": f"t0.{some_thread}"})
    after_everything = alice.get(THREADS, {"cursor": f"t9999999999999999.{some_thread}"})
    no_earlier_run = alice.get(runs, {"cursor": "r0.1"})
    every_run = alice.get(runs, {"cursor": "r9999999999999999.999999999999999999"})

    assert before_everything.status_code == 200 and before_everything.json()["threads"] == []
    assert [t["threadId"] for t in after_everything.json()["threads"]] == [thread_id]
    assert no_earlier_run.status_code == 200 and no_earlier_run.json()["runs"] == []
    assert len(every_run.json()["runs"]) == 1


def test_a_thread_cursor_is_refused_by_the_run_list(alice, redis_queue):
    new_thread(alice)
    thread_id = new_thread(alice)
    cursor = alice.get(THREADS, {"limit": 1}).json()["next"]

    response = alice.get(f"{THREADS}/{thread_id}/runs", {"cursor": cursor})

    assert response.status_code == 400
    assert response.json() == {
        "detail": "cursor is not valid: pass the next value of the page before"
    }


def test_a_stranger_gets_404_on_every_endpoint_and_changes_nothing(alice, bob, redis_queue):
    thread_id = new_thread(alice)

    answers = [
        bob.get(f"{THREADS}/{thread_id}"),
        bob.get(f"{THREADS}/{thread_id}/runs"),
        bob.get("/api/v1/agent/runs/run-1"),
        bob.get("/api/v1/agent/runs/run-1", {"threadId": thread_id}),
        delete(bob, thread_id),
    ]

    assert [answer.status_code for answer in answers] == [404] * 5
    assert all(answer.json() == {"detail": "Not found."} for answer in answers)
    assert bob.get(THREADS).json() == {"threads": [], "next": None}
    assert Run.objects.get(thread_id=thread_id).status == Run.Status.QUEUED


def test_an_anonymous_caller_gets_401(client):
    assert client.get(THREADS).status_code == 401
    assert client.get(f"{THREADS}/{uuid.uuid4()}").status_code == 401
    assert client.delete(f"{THREADS}/{uuid.uuid4()}").status_code == 401
    assert client.get("/api/v1/agent/runs/run-1").status_code == 401


def test_a_run_id_no_run_can_have_is_a_404(alice):
    assert alice.get("/api/v1/agent/runs/a%00b").status_code == 404
    assert alice.get("/api/v1/agent/runs/" + "r" * 129).status_code == 404


# Usage, and what a deletion keeps ------------------------------------------------------------


@pytest.fixture
def deepseek(settings):
    """Every stage on DeepSeek at a loopback server that reports DeepSeek's usage fields."""
    with FakeOpenAI() as fake:
        fake.usage = DEEPSEEK_METADATA
        settings.DEEPSEEK_API_KEY = "sk-test"
        settings.DEEPSEEK_BASE_URL = fake.base_url
        settings.AGENT_ROUTER_MODEL = settings.AGENT_WORKER_MODEL = DEEPSEEK
        settings.AGENT_MEMORY_MODEL = DEEPSEEK
        settings.AGENT_MODEL_MAX_RETRIES = 0
        yield fake


def test_a_runs_usage_and_cost_are_its_records_totals_and_outlive_its_thread(
    alice, redis_queue, deepseek
):
    price_entry(DEEPSEEK, (None, "0.00000028", "0.00000042", "0.000000028"))
    body = run_input()
    post_run(alice, body)
    run_jobs(redis_queue)
    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, run.error

    detail = alice.get(f"/api/v1/agent/runs/{body['runId']}").json()

    assert detail["status"] == "completed" and detail["finishedAt"]
    assert detail["usage"] == {
        "inputTokens": 3600,
        "outputTokens": 900,
        "totalTokens": 4500,
        "cachedPromptTokens": 3072,
        "promptCacheHitTokens": 3072,
        "promptCacheMissTokens": 528,
        "reasoningTokens": 0,
        "modelCalls": 3,
        "usageComplete": True,
    }
    assert detail["cost"] == {
        "amount": str(DEEPSEEK_COST * 3),
        "currency": "USD",
        "costSource": "catalog_fallback",
        "unpricedCalls": 0,
    }
    today = timezone.now().date()
    before = costs_report(start=today, end=today).totals

    assert delete(alice, body["threadId"]).status_code == 204

    records = list(UsageRecord.objects.all())
    assert len(records) == 3
    assert {(r.run_id, str(r.thread_ref), r.run_ref) for r in records} == {
        (None, body["threadId"], body["runId"])
    }
    assert sum((r.cost or Decimal(0) for r in records), Decimal(0)) == DEEPSEEK_COST * 3
    assert costs_report(start=today, end=today).totals == before


def test_deleting_a_thread_removes_what_it_holds_and_nothing_else(
    alice, redis_queue, alice_image_url, attachment_root
):
    shared_image = alice_image_url()
    own_image = alice_image_url()
    content = [
        {"type": "text", "text": "look"},
        {"type": "binary", "mimeType": "image/png", "url": own_image},
        {"type": "binary", "mimeType": "image/png", "url": shared_image},
    ]
    doomed = run_input(messages=[{"id": "msg-1", "role": "user", "content": content}])
    kept = run_input(
        messages=[
            {
                "id": "msg-1",
                "role": "user",
                "content": [{"type": "binary", "mimeType": "image/png", "url": shared_image}],
            }
        ]
    )
    assert post_run(alice, doomed).status_code == 202
    assert post_run(alice, kept).status_code == 202
    run_jobs(redis_queue)  # both runs complete: events, answers
    doomed_run = Run.objects.get(thread_id=doomed["threadId"])
    CalendarEvent.objects.create(
        owner_id=doomed_run.thread.owner_id,
        run=doomed_run,
        title="standup",
        starts_at=timezone.now(),
        event_timezone="UTC",
    )
    key = stream_key(doomed["threadId"])
    assert redis_client().exists(key)
    images_before = {a.path for a in Attachment.objects.all()}
    assert len(images_before) == 2

    response = delete(alice, doomed["threadId"])

    assert response.status_code == 204 and response.content == b""
    assert not Thread.objects.filter(pk=doomed["threadId"]).exists()
    assert not Run.objects.filter(thread_id=doomed["threadId"]).exists()
    assert not Message.objects.filter(thread_id=doomed["threadId"]).exists()
    assert not RunEvent.objects.filter(thread_id=doomed["threadId"]).exists()
    assert not CalendarEvent.objects.exists()
    assert not redis_client().exists(key)
    # The image only the deleted thread used is gone, row and file; the shared one stays.
    [left] = Attachment.objects.all()
    assert left.path in shared_image
    stored = [path for path in attachment_root.rglob("*") if path.is_file()]
    assert [path.name for path in stored] == [left.path.rsplit("/", 1)[-1]]
    # The other thread is whole.
    assert Run.objects.get(thread_id=kept["threadId"]).status == Run.Status.COMPLETED
    assert alice.get(f"{THREADS}/{kept['threadId']}").status_code == 200
    assert alice.get(f"{THREADS}/{doomed['threadId']}").status_code == 404


def test_deleting_a_thread_cancels_its_queued_runs_first(alice, redis_queue, monkeypatch):
    thread_id = new_thread(alice, runs=2)
    cancelled = []

    def spy(*, run):
        ended = run_cancel(run=run)
        cancelled.append((ended.run_id, ended.status))
        return ended

    monkeypatch.setattr(thread_services, "run_cancel", spy)

    assert delete(alice, thread_id).status_code == 204
    run_jobs(redis_queue)  # their jobs find nothing to run

    assert cancelled == [("run-2", "cancelled"), ("run-1", "cancelled")]
    assert not Thread.objects.exists() and not Run.objects.exists()
    assert not RunEvent.objects.exists()


def test_deleting_a_thread_stops_its_running_runs_job(alice, redis_queue):
    body = run_input()
    with FakeOpenAI() as slow_model:
        slow_model.delay = 30  # the model would answer long after the test is over
        worker = start_worker(
            AGENT_WORKER_MODEL="openai/gpt-test",
            OPENAI_BASE_URL=slow_model.base_url,
            OPENAI_API_KEY="sk-test",
        )
        try:
            post_run(alice, body)
            wait_for(lambda: slow_model.requests)  # the model call is in flight
            task_id = Run.objects.get(run_id=body["runId"]).task_id

            response = delete(alice, body["threadId"])

            job = Job.fetch(str(task_id), connection=redis_queue.connection)
            assert job.get_status() == JobStatus.STOPPED  # stopped, not finished
        finally:
            stop_process(worker)

    assert response.status_code == 204
    assert not Thread.objects.exists() and not Run.objects.exists()
