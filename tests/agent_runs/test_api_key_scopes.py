"""API keys' scopes, expiry and revocation (docs/protocols/agui.md, Authentication): a key
with only the read scope reads and streams on every protocol and is refused (403, in the
protocol's own error shape) whatever creates, acts or deletes; an expired or revoked key is
a 401."""

import json
import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
import websocket
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from agent_runs.models import ApiToken, Run
from agent_runs.services.lifecycle import run_cancel
from agent_runs.services.tokens import api_token_create
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input

pytestmark = pytest.mark.django_db

LACKS_WRITE = "this API key lacks the write scope"
# The one POST a read key may make: the stream token it issues only reads a thread's stream.
READ_BY_POST = {"runs_stream_token_create"}


def bearer(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def alice_reader(alice: APIClient) -> str:
    """A second key of alice's (she has a full one already), with only the read scope."""
    return api_token_create(username="alice", name="dashboard", scopes=["read"])


@pytest.fixture
def alices_thread(alice: APIClient, redis_queue: Any) -> dict[str, str]:
    """A thread of alice's with an ended run, made with her full key: its path parameters."""
    body = run_input(runId="run-1")
    assert post_run(alice, body).status_code == 202
    for run in Run.objects.all():
        run_cancel(run=run)
    return {"thread_id": body["threadId"], "run_id": "run-1", "task_id": body["threadId"]}


def error_message(body: dict[str, Any]) -> str:
    """The message of an error body, in any of the five protocols' shapes."""
    if "detail" in body:  # AG-UI and REST
        return str(body["detail"])
    if "jsonrpc" in body:  # A2A
        return str(body["error"]["message"])
    if isinstance(body.get("error"), dict):  # OpenAI Responses, the Agent API
        return str(body["error"]["message"])
    return str(body["message"])  # the Agent Protocol


def schema_operations() -> list[tuple[str, str, str]]:
    """(operation id, method, path) of every operation of the OpenAPI schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (operation["operationId"], method.upper(), path)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


A2A_SEND = {
    "jsonrpc": "2.0",
    "id": "send-1",
    "method": "message/send",
    "params": {
        "message": {
            "kind": "message",
            "messageId": "m-1",
            "role": "user",
            "parts": [{"kind": "text", "text": "Plan my day"}],
        }
    },
}


def test_a_read_key_is_refused_every_operation_but_reads_on_every_protocol(
    alice_reader, alices_thread
):
    """Every operation of the schema, asked with a read key: each non-GET is a 403 in its
    protocol's shape (nothing written), no GET is a 403."""
    reader = bearer(alice_reader)
    runs_before, keys_before = Run.objects.count(), ApiToken.objects.count()
    answered: dict[str, int] = {}
    operations = schema_operations()
    for operation_id, method, path in operations:
        if operation_id == "runs_events_retrieve":
            continue  # served by Channels, not in-process: streamed below
        url = re.sub(r"{(\w+)}", lambda found: alices_thread.get(found[1], "x"), path)
        body: Any = A2A_SEND if path == "/a2a" else {}
        response = reader.generic(method, url, json.dumps(body), content_type="application/json")
        answered[operation_id] = response.status_code
        if method == "GET" or operation_id in READ_BY_POST:
            assert response.status_code != 403, (operation_id, response.content)
        else:
            assert response.status_code == 403, (operation_id, response.content)
            assert error_message(response.json()) == LACKS_WRITE, operation_id
    assert Run.objects.count() == runs_before and ApiToken.objects.count() == keys_before
    assert len(answered) == len(operations) - 1 > 40
    # The interrupts' answers, uploads, deletes, cancels and every protocol's create are in.
    assert {
        "interrupts_answer",
        "attachments_create",
        "threads_destroy",
        "runs_cancel",
        "agui_run",
        "runs_create",
        "ap_tasks_create",
        "ap_v1_tasks_create",
        "agent_api_process",
        "openai_responses_create",
        "a2a_jsonrpc",
    } <= set(answered)


def test_the_schema_lists_the_403_of_a_read_key_on_every_operation_that_writes(client):
    schema = client.get("/api/schema/?format=json").json()
    listed = {
        operation["operationId"]: "403" in operation["responses"]
        for item in schema["paths"].values()
        for method, operation in item.items()
        if method != "get" and operation["operationId"] not in READ_BY_POST
    }
    assert listed and all(listed.values()), listed
    answer = schema["paths"]["/api/v1/agent/interrupts/{interrupt_id}"]["post"]["responses"]
    assert answer["403"]["description"] == "An API key without the `write` scope"


def test_a_refusal_keeps_each_protocol_s_error_shape(alice_reader, alices_thread):
    reader = bearer(alice_reader)

    agui = reader.post("/api/v1/agent/runs", run_input(), format="json")
    assert agui.json() == {"detail": LACKS_WRITE}
    openai = reader.post("/openai/v1/responses", {"model": "x", "input": "hi"}, format="json")
    assert openai.json()["error"] == {
        "message": LACKS_WRITE,
        "type": "permission_error",
        "param": None,
        "code": "permission_denied",
    }
    agent_api = reader.post("/api/v1/agent/process", {}, format="json")
    assert agent_api.json() == {"error": {"code": "permission_denied", "message": LACKS_WRITE}}
    for path in ("/api/tasks", "/ap/v1/agent/tasks"):
        refused = reader.post(path, {"input": "hi"}, format="json")
        assert refused.json() == {"error": "Forbidden", "message": LACKS_WRITE}
    a2a = reader.post("/a2a", A2A_SEND, format="json")
    assert a2a.status_code == 403
    assert a2a.json()["id"] == "send-1" and a2a.json()["error"]["code"] == -32600


def test_a_read_key_reads_a2a_tasks_but_cannot_cancel_them(alice_reader, alices_thread):
    reader = bearer(alice_reader)
    task_id = alices_thread["task_id"]

    listed = reader.post(
        "/a2a",
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        format="json",
        HTTP_A2A_VERSION="1.0",
    )
    assert listed.status_code == 200, listed.content
    assert "result" in listed.json(), listed.json()
    cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": task_id}}
    refused = reader.post("/a2a", cancel, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["message"] == LACKS_WRITE


def test_a_full_key_and_a_session_have_both_scopes(alice, staff_client, redis_queue):
    assert post_run(alice, run_input()).status_code == 202
    assert staff_client.get("/api/v1/agent/keys").status_code == 200
    assert ApiToken.objects.get(user__username="alice").scope_list == ["read", "write"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_read_key_streams_a_thread_and_follows_it_on_the_websocket(
    alice_reader, alices_thread, daphne_port
):
    thread_id = alices_thread["thread_id"]

    stream = read_sse(daphne_port, thread_id, token=alice_reader, max_frames=2)
    assert stream.status == 200, stream.body
    assert stream.events[0]["data"]["type"] == "RUN_STARTED"

    socket = websocket.create_connection(
        f"ws://127.0.0.1:{daphne_port}/ws",
        header=[f"Authorization: Bearer {alice_reader}"],
        timeout=10,
    )
    try:
        assert json.loads(socket.recv())["type"] == "connected"
        socket.send(json.dumps({"type": "subscribe", "agentId": thread_id}))
        subscribed = json.loads(socket.recv())
        assert (subscribed["type"], subscribed["agentId"]) == ("subscribed", thread_id)
        assert json.loads(socket.recv())["type"].startswith("task.")  # its frames follow
    finally:
        socket.close()


def test_an_expired_key_is_a_401_on_every_protocol(redis_queue):
    raw_key = api_token_create(username="carol", expires_in=timedelta(days=1))
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client = bearer(raw_key)

    rest = client.get("/api/v1/agent/threads")
    assert rest.status_code == 401 and rest.json() == {"detail": "This API key has expired."}
    for path in ("/api/tasks", "/openai/v1/responses/resp_x", "/api/v1/agent/process/x"):
        assert client.get(path).status_code == 401, path
    assert client.post("/a2a", A2A_SEND, format="json").status_code == 401


def test_a_key_not_yet_expired_works(redis_queue):
    raw_key = api_token_create(username="carol", expires_in=timedelta(days=1))
    assert bearer(raw_key).get("/api/v1/agent/threads").status_code == 200


def test_staff_list_keys_in_the_admin_and_a_revoked_one_is_a_401_at_once(
    alice, alice_reader, staff_client
):
    assert alice.get("/api/v1/agent/threads").status_code == 200  # remembered by now
    page = staff_client.get("/admin/agent_runs/apitoken/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "dashboard" in html and alice_reader[:8] in html and alice_reader not in html
    for column in ("Name", "Prefix", "Scopes", "Created at", "Last used at", "Expires at"):
        assert column in html

    full = ApiToken.objects.get(user__username="alice", scopes="read,write")
    revoked = staff_client.post(
        "/admin/agent_runs/apitoken/", {"action": "revoke", "_selected_action": [full.pk]}
    )
    assert revoked.status_code == 302
    full.refresh_from_db()
    assert full.revoked_at is not None

    refused = alice.get("/api/v1/agent/threads")
    assert refused.status_code == 401
    assert refused.json() == {"detail": "This API key has been revoked."}
    assert bearer(alice_reader).get("/api/v1/agent/threads").status_code == 200


def test_the_keys_endpoint_lists_the_caller_s_own_keys_and_never_a_secret(
    alice, alice_token, alice_reader, bob, bob_token
):
    response = bearer(alice_reader).get("/api/v1/agent/keys")

    assert response.status_code == 200
    keys = response.json()["keys"]
    assert [key["name"] for key in keys] == ["dashboard", ""]  # newest first
    assert keys[0]["scopes"] == ["read"] and keys[1]["scopes"] == ["read", "write"]
    assert [key["current"] for key in keys] == [True, False]
    assert keys[0]["prefix"] == alice_reader[:8]
    assert set(keys[0]) == {
        "name",
        "prefix",
        "scopes",
        "createdAt",
        "lastUsedAt",
        "expiresAt",
        "revokedAt",
        "current",
    }
    text = response.content.decode()
    for secret in (alice_token, alice_reader, bob_token):
        assert secret not in text and ApiToken.hash_key(secret) not in text
    assert [key["prefix"] for key in bob.get("/api/v1/agent/keys").json()["keys"]] == [
        bob_token[:8]
    ]
    assert APIClient().get("/api/v1/agent/keys").status_code == 401


def test_the_command_takes_a_name_scopes_and_an_expiry(redis_queue):
    out = StringIO()
    call_command(
        "create_api_token",
        "carol",
        "--name",
        "ci",
        "--scopes",
        "read",
        "--expires-in",
        "7",
        stdout=out,
    )
    raw_key = out.getvalue().strip()
    token = ApiToken.objects.get(key_hash=ApiToken.hash_key(raw_key))
    assert (token.name, token.scopes, token.user.username) == ("ci", "read", "carol")
    assert token.expires_at is not None
    assert abs(token.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)

    call_command("create_api_token", "carol", stdout=out)
    default = ApiToken.objects.exclude(pk=token.pk).get()
    assert (default.name, default.scopes, default.expires_at) == ("", "read,write", None)


@pytest.mark.parametrize(
    "options",
    [["--scopes", "write"], ["--scopes", "read,admin"], ["--scopes", ""], ["--expires-in", "0"]],
)
def test_the_command_refuses_bad_scopes_and_expiries_and_writes_nothing(options, redis_queue):
    with pytest.raises(CommandError):
        call_command("create_api_token", "carol", *options)
    assert not ApiToken.objects.exists()
    assert not get_user_model().objects.filter(username="carol").exists()
