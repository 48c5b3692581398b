"""``GET /api/v1/agent/ag-ui/capabilities``: AG-UI 1.0's ``AgentCapabilities``, saying what the
server does and what it does not do yet."""

import pytest
from ag_ui.core import AgentCapabilities
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

CAPABILITIES = "/api/v1/agent/ag-ui/capabilities"


def test_the_capabilities_are_agui_s_schema_and_say_what_the_server_does(alice):
    response = alice.get(CAPABILITIES)

    assert response.status_code == 200
    body = response.json()
    parsed = AgentCapabilities.model_validate(body)  # AG-UI's own type, as sent
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == body
    assert body["transport"]["streaming"] is True and body["transport"]["resumable"] is True
    assert body["tools"] == {"supported": True, "clientProvided": True, "parallelCalls": True}
    assert body["multimodal"]["input"]["image"] is True
    assert body["state"]["memory"] is True
    # A reasoning model's thinking streams as REASONING_* events, in the clear.
    assert body["reasoning"] == {"supported": True, "streaming": True, "encrypted": False}
    # Not done yet: said so, never claimed.
    assert body["humanInTheLoop"] == {
        "supported": True,
        "approvals": True,
        "interventions": False,
        "feedback": False,
    }
    assert body["custom"] == {"cancel": True}


def test_the_capabilities_need_credentials():
    response = APIClient().get(CAPABILITIES)

    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}
