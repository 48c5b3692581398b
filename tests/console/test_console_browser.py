"""The console in Debian's Chromium, driven by Playwright, against daphne and a real worker
(production settings) whose model is the loopback fake: a streamed answer, a tool call card,
an image attachment, a rendered ui_schema and its suggested action, Stop, a dropped
connection, earlier days, phone width, the keyboard and accessible names. docs/console.md."""

import json
import re
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, Page, expect

from agent_runs.models import Message, Run, Thread
from agent_runs.services.tokens import api_token_create
from tests.attachments.images import png_bytes
from tests.conftest import wait_for
from tests.console.conftest import Live, signed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ANSWER = [
    "Your week ",
    "looks calm: ",
    "two meetings ",
    "on Tuesday, ",
    "a dentist ",
    "appointment on ",
    "Thursday, ",
    "and nothing ",
    "on Friday.",
]


def last_answer(page: Page) -> str:
    text: str = page.locator(".msg-agent .answer").last.text_content() or ""
    return text


def run_ended(page: Page) -> None:
    """The composer is back: Send shown and enabled, Stop hidden."""
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#stop")).to_be_hidden()


def send(page: Page, text: str) -> None:
    page.locator("#composer-input").fill(text)
    page.locator("#composer-input").press("Enter")


def latest_run(**filters: Any) -> Run:
    run = Run.objects.filter(**filters).order_by("-created_at").first()
    assert run is not None
    return run


def test_an_answer_streams_in_token_by_token(live: Live, alice_user: Any, context: Any) -> None:
    live.fake.answer = ANSWER
    live.fake.chunk_delay = 0.12
    page = signed_in(context, live)
    send(page, "What does my week look like?")

    # The user's message shows at once; the answer grows in several steps before the end.
    expect(page.locator(".msg-user").last).to_contain_text("What does my week look like?")
    expect(page.locator("#stop")).to_be_visible()
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while page.locator("#stop").is_visible() and time.monotonic() < deadline:
        text = last_answer(page)
        if text and (not seen or text != seen[-1]):
            seen.append(text)
        time.sleep(0.03)
    run_ended(page)
    whole = "".join(ANSWER)
    assert last_answer(page) == whole
    partial = [text for text in seen if text != whole]
    assert len(partial) >= 3, seen
    assert all(whole.startswith(text) for text in seen)

    run = latest_run(thread__owner=alice_user)
    assert run.status == Run.Status.COMPLETED
    assert Message.objects.get(run=run, role="assistant").content == whole
    # A new thread: the list shows it, titled by its first message, as the current one.
    current = page.locator(".thread-button[aria-current=true]")
    expect(current).to_contain_text("What does my week look like?")
    assert current.get_attribute("data-thread-id") == str(run.thread_id)


def test_a_tool_call_shows_as_a_card_with_its_arguments_result_and_status(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    live.fake.route = {"route": "use_tools", "tools": ["calendar_list"]}
    live.fake.tool_call_turns = [[("call_1", "calendar_list", '{"days": 3}')]]
    live.fake.answer = ["Nothing is on your calendar."]
    page = signed_in(context, live)
    send(page, "What is on my calendar?")

    card = page.locator(".tool-card")
    expect(card.locator(".tool-name")).to_have_text("calendar_list")
    expect(card.locator(".tool-status")).to_have_text("Succeeded")
    run_ended(page)
    assert last_answer(page) == "Nothing is on your calendar."
    # Collapsed until opened, as a details element.
    expect(card.locator(".tool-args")).to_be_hidden()
    card.locator("summary").click()
    expect(card.locator(".tool-args")).to_be_visible()
    assert json.loads(card.locator(".tool-args").text_content() or "") == {"days": 3}
    result = json.loads(card.locator(".tool-result").text_content() or "")
    assert result["events"] == [] and result["count"] == 0

    run = latest_run(thread__owner=alice_user)
    tool_message = Message.objects.get(run=run, role="tool")
    assert tool_message.metadata["tool_name"] == "calendar_list"
    assert json.loads(tool_message.content)["count"] == 0


def test_the_model_s_reasoning_shows_collapsed_above_its_answer_and_after_a_reload(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    thoughts = ["The user says hello.", " A greeting back will do."]
    live.fake.reasoning = thoughts
    page = signed_in(context, live)
    send(page, "Hello there")
    run_ended(page)

    def shown_collapsed() -> Any:
        turn = page.locator(".msg-agent").last
        block = turn.locator("details.reasoning")
        expect(block).to_have_count(1)
        expect(block.locator("summary")).to_have_text("Reasoning")
        expect(block.locator(".reasoning-text")).to_be_hidden()  # collapsed until opened
        assert "greeting" not in (turn.locator(".answer").text_content() or "")
        return block

    block = shown_collapsed()
    assert last_answer(page) == "Hello from the fake model."
    # Opened from the keyboard, it holds the reasoning as the model streamed it.
    block.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(block.locator(".reasoning-text")).to_have_text("".join(thoughts))
    run = latest_run(thread__owner=alice_user)
    assert Message.objects.get(run=run, message_id=f"reasoning-worker-{run.run_id}-1")

    # Reloaded, the thread's history (with ?include=reasoning) shows it the same way.
    page.reload()
    expect(page.locator("[data-ready=true]")).to_have_count(1)
    expect(page.locator(".msg-agent .answer").last).to_have_text("Hello from the fake model.")
    block = shown_collapsed()
    block.locator("summary").click()
    expect(block.locator(".reasoning-text")).to_have_text("".join(thoughts))


def test_an_image_is_previewed_uploaded_and_sent_as_a_signed_url(
    live: Live, alice_user: Any, context: BrowserContext, tmp_path: Any
) -> None:
    picture = tmp_path / "square.png"
    picture.write_bytes(png_bytes(size=(40, 30)))
    notes = tmp_path / "notes.txt"
    notes.write_text("not an image")
    page = signed_in(context, live)

    page.locator("#attach-input").set_input_files(str(picture))
    preview = page.locator(".preview")
    expect(preview).to_have_count(1)
    expect(preview.locator("img")).to_have_attribute("alt", "Preview of square.png")
    expect(preview.locator(".preview-status")).to_have_text("")  # uploaded
    # Anything but an image is refused with a clear message, and nothing is added.
    page.locator("#attach-input").set_input_files(str(notes))
    expect(page.locator("#composer-error")).to_contain_text("“notes.txt” is not an image")
    expect(preview).to_have_count(1)

    posted: list[Any] = []
    page.on(
        "request",
        lambda request: (
            posted.append(request.post_data_json)
            if request.method == "POST" and request.url.endswith("/api/v1/agent/runs")
            else None
        ),
    )
    send(page, "What is in this picture?")
    run_ended(page)
    expect(page.locator(".preview")).to_have_count(0)
    # Sent as a binary block whose url is the upload's signed URL...
    blocks = posted[0]["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "What is in this picture?"}
    assert blocks[1]["type"] == "binary" and blocks[1]["mimeType"] == "image/png"
    signed_url = blocks[1]["url"]
    assert signed_url.startswith(f"{live.url}/storage/v1/object/sign/agent-inputs/")
    # ...which the run keeps as the image's storage place (a signed URL is a credential).
    run = latest_run(thread__owner=alice_user)
    stored = Message.objects.get(run=run, role="user").metadata["user_message_attachments"]
    assert stored["mime_type"] == "image/png"
    assert f"/sign/{stored['bucket']}/{stored['path']}?token=" in signed_url
    assert run.input["messages"][0]["content"][1]["type"] == "binary"

    # The conversation shows the image itself, loaded from its signed URL.
    shown = page.locator(".msg-user img").last
    assert shown.get_attribute("src") == signed_url
    wait_for(lambda: shown.evaluate("image => image.complete && image.naturalWidth") == 40)


def test_more_than_three_images_are_refused_and_a_preview_can_be_removed(
    live: Live, alice_user: Any, context: BrowserContext, tmp_path: Any
) -> None:
    files = []
    for index in range(4):
        path = tmp_path / f"picture-{index}.png"
        path.write_bytes(png_bytes(size=(10 + index, 10)))
        files.append(str(path))
    page = signed_in(context, live)
    page.locator("#attach-input").set_input_files(files)
    expect(page.locator(".preview")).to_have_count(3)
    expect(page.locator("#composer-error")).to_have_text("At most 3 images per message.")
    page.get_by_role("button", name="Remove image picture-1.png").click()
    expect(page.locator(".preview")).to_have_count(2)
    alts = [image.get_attribute("alt") for image in page.locator(".preview img").all()]
    assert alts == ["Preview of picture-0.png", "Preview of picture-2.png"]
    expect(page.locator("#attach-input")).to_be_enabled()  # room for one more again


def upload_for(live: Live, username: str) -> str:
    """A signed URL of an image of the user's, uploaded through the public API."""
    token = api_token_create(username=username)
    answer = httpx.post(
        f"{live.url}/api/v1/agent/attachments",
        headers={"Authorization": f"Bearer {token}"},
        files={"file": ("chart.png", png_bytes(size=(64, 32)), "image/png")},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    url: str = answer.json()["url"]
    return url


def every_node_output(image_url: str) -> dict[str, Any]:
    return {
        "result_type": "execution_report",
        "status": "partial_success",
        "suggested_actions": [
            {"label": "Plan Monday", "prompt": "Plan my Monday"},
            {"label": "Show Friday", "prompt": "What is on Friday?"},
        ],
        "ui_hints": {
            "appearance": "card",
            "title": "Your week",
            "blocks": [
                {"type": "text", "content": "Three appointments", "role": "title"},
                {"type": "text", "content": "Tuesday is the busiest day.", "role": "body"},
                {"type": "text", "content": "Times are in UTC.", "role": "caption"},
                {"type": "badge", "label": "2 conflicts", "status": "error"},
                {"type": "list", "items": ["Stand-up", "Design review", "Dentist"]},
                {"type": "key_value", "items": [{"key": "Meetings", "value": "2"}]},
                {"type": "divider"},
                {"type": "image", "url": image_url, "alt": "A chart of the week"},
            ],
        },
    }


def test_a_ui_schema_renders_every_node_type_and_an_action_sends_its_prompt(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    image_url = upload_for(live, "alice")
    live.fake.output = every_node_output(image_url)
    page = signed_in(context, live)
    send(page, "Summarise my week")
    run_ended(page)

    card = page.locator(".msg-agent .ui .ui-root")
    assert "ui-stack-card" in (card.get_attribute("class") or "")
    expect(card.locator("h3.ui-text-title")).to_have_text(["Your week", "Three appointments"])
    expect(card.locator(".ui-text-body")).to_have_text("Tuesday is the busiest day.")
    expect(card.locator(".ui-text-caption")).to_have_text("Times are in UTC.")
    expect(card.locator(".ui-badge-warning")).to_have_text("PARTIAL_SUCCESS")  # the status
    expect(card.locator(".ui-badge-error")).to_have_text("2 conflicts")
    expect(card.locator(".ui-list li")).to_have_text(["Stand-up", "Design review", "Dentist"])
    expect(card.locator(".ui-kv dt")).to_have_text("Meetings")
    expect(card.locator(".ui-kv dd")).to_have_text("2")
    expect(card.locator("hr.ui-divider")).to_have_count(1)
    image = card.locator("img.ui-image")
    expect(image).to_have_attribute("alt", "A chart of the week")
    assert image.get_attribute("src") == image_url
    wait_for(lambda: image.evaluate("image => image.complete && image.naturalWidth") == 64)
    actions = card.get_by_role("group", name="Suggested actions").get_by_role("button")
    expect(actions).to_have_text(["Plan Monday", "Show Friday"])

    first_run = latest_run(thread__owner=alice_user)
    actions.first.click()
    expect(page.locator(".msg-user .msg-text").last).to_have_text("Plan my Monday")
    run_ended(page)
    second = latest_run(thread__owner=alice_user)
    assert second.pk != first_run.pk and second.thread_id == first_run.thread_id
    assert second.input["messages"][0]["content"] == "Plan my Monday"
    assert second.status == Run.Status.COMPLETED


def test_stop_cancels_the_run_mid_answer_says_so_after_a_reload_and_the_composer_works(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    live.fake.answer = ANSWER * 3
    live.fake.chunk_delay = 0.25
    page = signed_in(context, live)
    send(page, "Tell me a long story")
    expect(page.locator(".msg-agent .answer").last).not_to_be_empty()
    expect(page.locator("#send")).to_be_hidden()
    page.get_by_role("button", name="Stop").click()

    turn = page.locator(".msg-agent").last
    expect(turn.locator(".status-stopped")).to_have_text("Stopped")
    run_ended(page)
    stopped = latest_run(thread__owner=alice_user)
    assert stopped.status == Run.Status.CANCELLED
    assert len(last_answer(page)) < len("".join(ANSWER * 3))

    # Reloaded, the thread opens again (the newest): its user message, then how its run ended.
    page.reload()
    expect(page.locator("[data-ready=true]")).to_have_count(1)
    expect(page.locator(".thread-status-cancelled")).to_have_text("stopped")
    expect(page.locator(".msg-user .msg-text").last).to_have_text("Tell me a long story")
    turns = page.locator(".msg")
    expect(turns.last.locator(".status-stopped")).to_have_text("Stopped")
    assert "msg-agent" in (turns.last.get_attribute("class") or "")

    live.fake.chunk_delay = 0
    live.fake.answer = ["A short one."]
    send(page, "A short one, then")
    expect(page.locator(".msg-agent .answer").last).to_have_text("A short one.")
    run_ended(page)
    assert latest_run(thread__owner=alice_user).status == Run.Status.COMPLETED


def test_an_answer_is_shown_once_and_a_card_only_repeating_it_is_not(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    live.fake.answer = ["The demo ", "answers you."]
    live.fake.output = {
        "result_type": "unknown",
        "status": "success",
        "ui_hints": {
            "appearance": "card",
            "title": "Demo answer",
            "blocks": [{"type": "text", "content": "The demo answers you.", "role": "body"}],
        },
    }
    page = signed_in(context, live)
    send(page, "Hello")
    run_ended(page)
    expect(page.locator(".msg-agent .answer").last).to_have_text("The demo answers you.")
    assert page.locator(".msg-agent .ui .ui-root").count() == 0
    assert (page.locator("#log").text_content() or "").count("The demo answers you.") == 1

    page.reload()  # the same from history
    expect(page.locator(".msg-agent .answer").last).to_have_text("The demo answers you.")
    assert page.locator(".msg-agent .ui .ui-root").count() == 0
    assert (page.locator("#log").text_content() or "").count("The demo answers you.") == 1


def stream_cut(url: str, cookies: dict[str, str], *, text_frames: int) -> tuple[str, int]:
    """The beginning of a live event stream, as a connection that breaks mid-answer gives it:
    its frames up to the ``text_frames``-th TEXT_MESSAGE_CONTENT, then half of the next
    frame. And the id of the last whole frame."""
    frames: list[str] = []
    with httpx.stream("GET", url, cookies=cookies, timeout=30) as response:
        assert response.status_code == 200
        buffer = ""
        for chunk in response.iter_text():
            buffer += chunk
            *whole, buffer = buffer.split("\n\n")
            frames.extend(frame + "\n\n" for frame in whole)
            texts = [i for i, frame in enumerate(frames) if "TEXT_MESSAGE_CONTENT" in frame]
            if len(texts) > text_frames:
                kept = frames[: texts[text_frames - 1] + 1]
                broken = frames[len(kept)]
                last_id = int(kept[-1].split("id: ")[1].split("\n")[0])
                return "".join(kept) + broken[: len(broken) // 2], last_id
    raise AssertionError(f"the stream ended before {text_frames} text frames: {frames}")


def test_a_dropped_connection_resumes_from_the_last_event_without_doubled_text(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    live.fake.answer = ANSWER
    live.fake.chunk_delay = 0.2
    page = signed_in(context, live)
    cookies = {cookie["name"]: cookie["value"] for cookie in context.cookies()}
    cut: list[int] = []
    resumed: list[str | None] = []

    def drop_the_first_connection(route: Any) -> None:
        if cut:  # the reconnections reach the server untouched
            resumed.append(route.request.headers.get("last-event-id"))
            route.continue_()
            return
        body, last_id = stream_cut(route.request.url, cookies, text_frames=3)
        cut.append(last_id)
        context.set_offline(True)  # and the network stays down for a while
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        route.fulfill(status=200, headers=headers, body=body)

    page.route("**/api/v1/agent/runs/*/events*", drop_the_first_connection)
    send(page, "What does my week look like?")
    reconnecting = page.locator(".msg-agent .status-reconnecting")
    expect(reconnecting).to_have_text("Connection lost: reconnecting…")
    partial = last_answer(page)
    assert partial and "".join(ANSWER).startswith(partial) and partial != "".join(ANSWER)
    time.sleep(1.5)  # attempts fail while offline; the model writes on meanwhile
    assert not resumed
    context.set_offline(False)
    run_ended(page)
    expect(reconnecting).to_have_count(0)

    whole = "".join(ANSWER)
    assert last_answer(page) == whole  # every delta once: none lost, none doubled
    assert page.locator(".msg-agent").count() == 1
    assert latest_run(thread__owner=alice_user).status == Run.Status.COMPLETED
    # The reconnection asked for what follows the last whole frame it had rendered.
    assert cut and resumed[0] == str(cut[0])


def thread_with_messages(owner: Any, days: dict[int, list[tuple[str, str]]]) -> Thread:
    """A thread of ``owner``'s with messages ``days`` days ago: {days ago: [(role, text)]}."""
    thread = Thread.objects.create(owner=owner)
    seq = 0
    for days_ago, messages in sorted(days.items(), reverse=True):
        for role, text in messages:
            seq += 1
            message = Message.objects.create(
                thread=thread, seq=seq, message_id=f"m-{seq}", role=role, content=text
            )
            # Seconds apart, not minutes: a day's messages fall on one date unless the test
            # runs in the first minute after midnight.
            moment = timezone.now() - timedelta(days=days_ago, seconds=60 - seq)
            Message.objects.filter(pk=message.pk).update(created_at=moment)
    Thread.objects.filter(pk=thread.pk).update(last_seq=seq)
    return thread


def test_load_earlier_days_shows_the_previous_day_above(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    thread_with_messages(
        alice_user,
        {
            3: [("user", "An old question"), ("assistant", "An old answer")],
            0: [("user", "A new question"), ("assistant", "A new answer")],
        },
    )
    page = signed_in(context, live)
    expect(page.locator("section.day")).to_have_count(1)
    expect(page.locator(".msg")).to_have_count(2)
    earlier = page.get_by_role("button", name="Load earlier days")
    expect(earlier).to_be_visible()
    earlier.click()

    expect(page.locator("section.day")).to_have_count(2)
    old_day = (timezone.now() - timedelta(days=3)).date().isoformat()
    assert page.locator("section.day").first.get_attribute("data-day") == old_day
    texts = [
        text.strip() for text in page.locator(".msg .msg-text, .msg .answer").all_text_contents()
    ]
    assert texts == ["An old question", "An old answer", "A new question", "A new answer"]
    expect(earlier).to_be_hidden()  # no day before it


def test_at_phone_width_the_threads_are_a_drawer_and_a_message_goes_to_the_picked_thread(
    live: Live, alice_user: Any, browser: Any
) -> None:
    older = thread_with_messages(alice_user, {2: [("user", "Older thread question")]})
    thread_with_messages(alice_user, {0: [("user", "Newer thread question")]})
    phone = browser.new_context(viewport={"width": 375, "height": 740}, has_touch=True)
    try:
        page = signed_in(phone, live)
        expect(page.locator(".msg-user .msg-text")).to_have_text("Newer thread question")
        threads = page.get_by_role("navigation", name="Threads")
        toggle = page.get_by_role("button", name="Threads")
        expect(threads).to_be_hidden()
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(threads).to_be_visible()
        threads.locator(f'[data-thread-id="{older.pk}"]').click()
        expect(threads).to_be_hidden()
        expect(page.locator(".msg-user .msg-text")).to_have_text("Older thread question")

        send(page, "Hello from a phone")
        expect(page.locator(".msg-agent .answer").last).to_have_text("Hello from the fake model.")
        run_ended(page)
        assert latest_run(thread__owner=alice_user).thread_id == older.pk
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
    finally:
        phone.close()


def test_the_keyboard_reaches_the_message_box_and_enter_sends(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    page = signed_in(context, live)
    page.locator("body").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "composer-input":
            break
    assert page.evaluate("document.activeElement.id") == "composer-input"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # focus is visible

    page.keyboard.type("First line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert page.locator("#composer-input").input_value() == "First line\nsecond line"
    expect(page.locator(".msg-user")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(page.locator(".msg-user .msg-text")).to_have_text("First line\nsecond line")
    run_ended(page)
    assert page.locator("#composer-input").input_value() == ""
    run = latest_run(thread__owner=alice_user)
    assert run.input["messages"][0]["content"] == "First line\nsecond line"


def unnamed_controls(page: Page) -> list[str]:
    """The form controls of the page without an accessible name (as the browser's
    accessibility tree computes it), described by their HTML."""
    missing = []
    for control in page.locator("button, input, textarea, select, summary").all():
        # Controls out of view at this width (the phone drawer's toggle) have no name to
        # compute; the file input is visually hidden behind its label, still named.
        if not control.is_visible() and control.get_attribute("id") != "attach-input":
            continue
        try:
            expect(control).to_have_accessible_name(re.compile(r"\S"), timeout=500)
        except AssertionError:
            missing.append(control.evaluate("node => node.outerHTML.slice(0, 120)"))
    return missing


def test_every_form_control_has_an_accessible_name(
    live: Live, alice_user: Any, context: BrowserContext, tmp_path: Any
) -> None:
    page = context.new_page()
    page.goto(f"{live.url}/console/login/")
    assert page.locator("input:not([type=hidden]), button").count() == 3
    assert unnamed_controls(page) == []

    live.fake.route = {"route": "use_tools", "tools": ["calendar_list"]}
    live.fake.tool_call_turns = [[("call_1", "calendar_list", "{}")]]
    live.fake.output = every_node_output(upload_for(live, "alice"))
    page = signed_in(context, live)
    send(page, "Summarise my week")
    run_ended(page)
    picture = tmp_path / "square.png"
    picture.write_bytes(png_bytes())
    page.locator("#attach-input").set_input_files(str(picture))
    expect(page.locator(".preview")).to_have_count(1)
    # A tool card, suggested actions, a preview's remove button, the composer, the drawer.
    assert page.locator("button, input, textarea, summary").count() >= 12
    assert unnamed_controls(page) == []


def test_a_thread_an_automation_job_made_names_the_job(
    live: Live, alice_user: Any, context: BrowserContext
) -> None:
    from agent_runs.services.automations import automation_job_create, automations_fire_due

    job = automation_job_create(
        owner=alice_user,
        name="morning-digest",
        schedule="0 9 * * *",
        timezone="Europe/Berlin",
        prompt="Summarise my day",
    )
    assert job.next_run_at is not None
    assert automations_fire_due(now=job.next_run_at) == 1
    wait_for(lambda: latest_run(thread__owner=alice_user).status == Run.Status.COMPLETED)

    page = signed_in(context, live)
    item = page.locator(".thread-button").first
    expect(item.locator(".thread-title")).to_have_text("Summarise my day")
    expect(item.locator(".thread-job")).to_have_text("job morning-digest")
