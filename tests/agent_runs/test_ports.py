"""The run core's ports (agent_runs/ports.py): filled by billing and attachments as the apps
start, and loud when no app filled one."""

import pytest

from agent_runs import ports
from attachments.ports import AttachmentsPort
from billing.ports import BillingPort


def test_billing_and_attachments_fill_their_ports_as_the_apps_start():
    assert isinstance(ports.billing(), BillingPort)
    assert isinstance(ports.attachments(), AttachmentsPort)


def test_a_port_no_app_filled_raises_naming_the_app_that_fills_it():
    port: ports.Port[ports.Billing] = ports.Port(name="billing", filled_by="billing")

    with pytest.raises(ports.PortNotFilled, match="'billing' app fills it"):
        port()
