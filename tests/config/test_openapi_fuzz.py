"""The live API against its own OpenAPI schema: schemathesis makes requests from the schema,
for every operation, and sends them to a real daphne with a real bearer token, with every
check it has (``--checks all``): each answer must be below 500, have a status the schema
lists, its content type, headers and body's schema; a request the schema refuses must be
refused, one without credentials too, a method not listed must answer 405; and a request the
schema allows must be accepted (or answered 401, 403, 404, 409 or 429). Runs it accepts stay
queued (no worker runs here).

What the server issued or holds, the schema names by a format or a media type, generated
here from the real thing: an image's signed URL (``attachment-url``), an automation job's
name (``automation-job``), an uploaded image's bytes (``image/png``…); and an automation
job's schedule (``cron-expression``), from a few real ones. A few rules no JSON
Schema can state (``BEYOND_ANY_SCHEMA``) are said in the schema's words; a request that
breaks one is checked as any other but for its acceptance (each protocol's own tests send
them).

POST /api/v1/agent/ag-ui answers with its run's event stream, which lasts as long as the run
(for ever, with no worker): it is left out here (tests/agent_runs/protocols/agui/ test it over
HTTP). POST /runs is asked for JSON, POST /openai/v1/responses to answer at once. The event
stream's GET is fuzzed with a timeout: a thread the fuzzer makes up has no stream to wait on.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from django.conf import settings as django_settings
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.specs.openapi.checks import positive_data_acceptance
from schemathesis.specs.openapi.formats import unregister_string_format

from agent_runs.models import AutomationJob, Run
from agent_runs.protocols.agui.inbound import MAX_USER_TEXT_CHARS
from agent_runs.protocols.agui.run_input_schema import ATTACHMENT_URL_FORMAT, AUTOMATION_JOB_FORMAT
from agent_runs.protocols.openai_responses.inbound import MAX_INPUT_CHARS
from agent_runs.resources.views.automations import CRON_FORMAT
from agent_runs.services.lifecycle import run_cancel
from attachments.images import IMAGE_KINDS
from tests.attachments.images import image_bytes
from tests.conftest import post_run, run_input, start_daphne, stop_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ALL_CHECKS = list(REGISTERED_CHECKS.get_all())
assert positive_data_acceptance in ALL_CHECKS and len(ALL_CHECKS) >= 14
# The Agent API's POST answers its run's stream, or waits for its end (stream: false): with
# no worker, as long as its wait lasts (tests/agent_runs/protocols/agent_api/ test it).
STREAMS_FOR_EVER = {"agui_run", "agent_api_process"}
FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,  # the same requests on every run
    database=None,
    suppress_health_check=list(HealthCheck),
)


def project_schema() -> Any:
    """The schema /api/schema/ serves (tests/config/test_openapi.py checks that it does),
    generated here so that each operation is a test of its own."""
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(generated)))


SCHEMA = project_schema()
OPERATION_IDS = sorted(
    result.ok().definition.raw["operationId"] for result in SCHEMA.get_all_operations()
)


@pytest.fixture(scope="module")
def fuzzed_port(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """A daphne of the fuzz's own, on the test database and Redis: the images it is sent
    are kept in a directory of the test's."""
    root = tmp_path_factory.mktemp("fuzzed-attachments")
    server, port = start_daphne(
        redis_url=django_settings.REDIS_URL, ATTACHMENT_STORAGE_ROOT=str(root)
    )
    yield port
    stop_process(server)


@pytest.fixture
def alices_thread(alice: Any, redis_queue: Any) -> dict[str, str]:
    """A thread of alice's with two ended runs, so that reads answer something: its path
    parameters."""
    body = run_input(runId="run-1")
    post_run(alice, body)
    post_run(alice, run_input(threadId=body["threadId"], runId="run-2"))
    for run in Run.objects.all():
        run_cancel(run=run)
    return {"thread_id": body["threadId"], "run_id": "run-1"}


@pytest.fixture
def server_held_values(fuzzed_port: int, alice_token: str) -> Iterator[None]:
    """The formats and media types the schema names for what the server issued or holds,
    generated from the real thing: signed URLs of two images alice uploaded, the names of two
    automation jobs (for this test only), and images of each type an upload may be."""
    urls = []
    for image_format, media_type in (("PNG", "image/png"), ("WEBP", "image/webp")):
        uploaded = httpx.post(
            f"http://127.0.0.1:{fuzzed_port}/api/v1/agent/attachments",
            headers={"Authorization": f"Bearer {alice_token}"},
            files={"file": ("image", image_bytes(image_format), media_type)},
            timeout=30,
        )
        assert uploaded.status_code == 201, uploaded.text
        urls.append(uploaded.json()["url"])
    jobs = [AutomationJob.objects.create(name=name).name for name in ("digest", "weekly-plan")]
    schemathesis.openapi.format(ATTACHMENT_URL_FORMAT, st.sampled_from(urls))
    schemathesis.openapi.format(AUTOMATION_JOB_FORMAT, st.sampled_from(jobs))
    schemathesis.openapi.format(CRON_FORMAT, st.sampled_from(CRON_EXPRESSIONS))
    for kind in IMAGE_KINDS:
        schemathesis.openapi.media_type(kind.mime_type, images(kind.pillow_format))
    yield
    unregister_string_format(ATTACHMENT_URL_FORMAT)
    unregister_string_format(AUTOMATION_JOB_FORMAT)
    unregister_string_format(CRON_FORMAT)


# An automation job's schedule (``cron-expression``): what a cron expression is, the schema
# says in words (croniter parses it).
CRON_EXPRESSIONS = ["", "0 9 * * *", "*/15 * * * 1-5", "30 2 1 * *", "0 0 29 2 *"]


def images(image_format: str) -> st.SearchStrategy[bytes]:
    """Real images of ``image_format``, of a few sizes and colours."""
    return st.builds(
        lambda width, height, colour: image_bytes(
            image_format, size=(width, height), colour=colour
        ),
        st.integers(1, 64),
        st.integers(1, 64),
        st.tuples(*[st.integers(0, 255)] * 3),
    )


def _user_text_too_long(body: Any) -> bool:
    """A user message whose text blocks are each within the limit, but not joined."""
    content = body["messages"][0]["content"]
    if not isinstance(content, list):
        return False
    texts = [block["text"] for block in content if block["type"] == "text"]
    return len("\n".join(texts)) > MAX_USER_TEXT_CHARS


def _answers_a_tool_call(body: Any) -> bool:
    """A tool message answers a client tool call its thread has pending: the threads the
    fuzzer names have none."""
    return any(message["role"] == "tool" for message in body["messages"])


def _approval_answered_twice(body: Any) -> bool:
    items = body["input"] if isinstance(body["input"], list) else []
    ids = [item["approval_request_id"] for item in items if "approval_request_id" in item]
    return len(ids) != len(set(ids))


def _response_text_too_long(body: Any) -> bool:
    items = body["input"] if isinstance(body["input"], list) else []
    content = items[0].get("content") if items else None
    texts = [part["text"] for part in content] if isinstance(content, list) else []
    return len("\n".join(texts)) > MAX_INPUT_CHARS


# Per operation, what tells a request that breaks a rule no JSON Schema can state, though the
# schema says it in words (positive_data_acceptance does not apply to it).
BEYOND_ANY_SCHEMA = {
    "runs_create": [_user_text_too_long, _answers_a_tool_call],
    "openai_responses_create": [_approval_answered_twice, _response_text_too_long],
}


def _answered_at_once(case: Any) -> Any:
    """A response asked for in the background, not streamed: with no worker, a streamed
    one, or one that waits for its run's end, lasts as long as its wait
    (tests/agent_runs/protocols/openai_responses/ test both)."""
    case.body = {**case.body, "background": True, "stream": False}
    return case


@pytest.mark.parametrize("operation_id", sorted(set(OPERATION_IDS) - STREAMS_FOR_EVER))
def test_the_live_api_answers_as_its_schema_says(
    operation_id: str,
    fuzzed_port: int,
    alice_token: str,
    alices_thread: dict[str, str],
    server_held_values: None,
) -> None:
    operation = SCHEMA.find_operation_by_id(operation_id)
    # Requests that fit the schema (each edge's own fuzz tests send the rest), its examples,
    # and requests naming alice's thread and run. (Not on the event stream: ?follow=true on
    # a thread that exists stays open.)
    strategies = [operation.as_strategy(), *SCHEMA.get_strategies_from_examples(operation)]
    names = set(re.findall(r"{(\w+)}", operation.path)) & set(alices_thread)
    if names and operation_id != "runs_events_retrieve":
        known = {name: alices_thread[name] for name in names}
        strategies.append(operation.as_strategy(path_parameters=known))
    cases = st.one_of(*strategies)
    if operation_id == "openai_responses_create":
        cases = cases.map(_answered_at_once)
    headers = {"Authorization": f"Bearer {alice_token}"}
    if operation_id == "runs_create":
        headers["Accept"] = "application/json"  # its event stream lasts as long as the run
    beyond = BEYOND_ANY_SCHEMA.get(operation_id, [])
    accepted = [check for check in ALL_CHECKS if check is not positive_data_acceptance]
    sent = []

    @given(case=cases)
    @FUZZ
    def answers_as_its_schema_says(case: Any) -> None:
        out_of_schema_words = any(rule(case.body) for rule in beyond)
        sent.append(out_of_schema_words)
        case.call_and_validate(
            base_url=f"http://127.0.0.1:{fuzzed_port}",
            headers=headers,
            checks=accepted if out_of_schema_words else ALL_CHECKS,
            timeout=10,
        )

    answers_as_its_schema_says()
    # Most requests are held to their acceptance.
    assert sent.count(True) <= len(sent) // 2, sent


PATHS = sorted({result.ok().path for result in SCHEMA.get_all_operations()})


@pytest.mark.parametrize("method", ["OPTIONS", "HEAD"])
def test_every_path_answers_options_and_head_below_500(
    method: str, daphne_port: int, alice_token: str, alices_thread: dict[str, str]
) -> None:
    """Every path of the schema, asked a method it may not list (OPTIONS, HEAD), answers
    below 500, and OPTIONS answers JSON (DRF's description, or the error)."""
    headers = {"Authorization": f"Bearer {alice_token}"}
    answered = {}
    for path in PATHS:
        url = re.sub(r"{(\w+)}", lambda found: alices_thread.get(found[1], "x"), path)
        response = httpx.request(
            method, f"http://127.0.0.1:{daphne_port}{url}", headers=headers, timeout=10
        )
        answered[path] = response.status_code
        if method == "OPTIONS" and response.content:
            assert response.headers["content-type"].startswith("application/json"), path
    assert {path: code for path, code in answered.items() if code >= 500} == {}
    assert len(answered) == len(PATHS) > 20


def test_every_operation_is_fuzzed_but_the_one_that_streams_for_ever():
    assert set(OPERATION_IDS) > STREAMS_FOR_EVER
    assert len(OPERATION_IDS) == len(set(OPERATION_IDS))
