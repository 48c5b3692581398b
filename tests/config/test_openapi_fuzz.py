"""The live API against its own OpenAPI schema: schemathesis makes requests from the schema,
for every operation, and sends them to a real daphne with a real bearer token, with every
check it has (``--checks all``): each answer must be below 500, have a status the schema
lists, its content type, headers and body's schema; a request the schema refuses must be
refused, one without credentials too, a method not listed must answer 405; and a request the
schema allows must be accepted (or answered 401, 403, 404, 409 or 429), except by the
operations listed in ``VALID_INPUT_NOT_ALL_IN_SCHEMA``. Runs it accepts stay queued (no
worker runs here).

POST /api/v1/agent/ag-ui answers with its run's event stream, which lasts as long as the run
(for ever, with no worker): it is left out here (tests/agent_runs/protocols/agui/ test it over
HTTP). POST /runs is asked for JSON. The event stream's GET is fuzzed with a timeout: a thread
the fuzzer makes up has no stream to wait on.
"""

import json
import re
from typing import Any

import httpx
import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.specs.openapi.checks import positive_data_acceptance

from agent_runs.models import Run
from agent_runs.services.lifecycle import run_cancel
from tests.conftest import post_run, run_input

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ALL_CHECKS = list(REGISTERED_CHECKS.get_all())
assert positive_data_acceptance in ALL_CHECKS and len(ALL_CHECKS) >= 14
# Operations whose valid input the schema does not describe in full, so that a request it
# allows may be refused (a 400 or 422): their bodies are free-form objects in the schema
# (each protocol's own documents describe them), or a valid value is one the server issued
# (a signed URL or token) or an image's bytes, which no schema can generate.
VALID_INPUT_NOT_ALL_IN_SCHEMA = {
    # Every JSON body is refused with a NUL (U+0000) anywhere, in the fields a task ignores
    # too (PostgreSQL's jsonb cannot hold one): JSON Schema cannot say that of any field.
    "ap_tasks_create": "no NUL anywhere in the body",
    "ap_v1_tasks_create": "no NUL anywhere in the body",
    "attachments_create": "an image's bytes",
    # A cron expression, an IANA timezone, a config of known tools; no unknown field.
    "automations_create": "a valid cron expression, IANA timezone and config",
    "automations_partial_update": "a valid cron expression, IANA timezone and config",
    "openai_responses_create": "a free-form body (the Responses API's own reference)",
    "runs_create": "RunAgentInput's rules (one user message, first) and signed image URLs",
}
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


@pytest.mark.parametrize("operation_id", sorted(set(OPERATION_IDS) - STREAMS_FOR_EVER))
def test_the_live_api_answers_as_its_schema_says(
    operation_id: str, daphne_port: int, alice_token: str, alices_thread: dict[str, str]
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
    headers = {"Authorization": f"Bearer {alice_token}"}
    if operation_id == "runs_create":
        headers["Accept"] = "application/json"  # its event stream lasts as long as the run

    checks = ALL_CHECKS
    if operation_id in VALID_INPUT_NOT_ALL_IN_SCHEMA:
        checks = [check for check in ALL_CHECKS if check is not positive_data_acceptance]

    @given(case=cases)
    @FUZZ
    def answers_as_its_schema_says(case: Any) -> None:
        case.call_and_validate(
            base_url=f"http://127.0.0.1:{daphne_port}", headers=headers, checks=checks, timeout=10
        )

    answers_as_its_schema_says()


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
