from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self) -> None:
        # The run core calls billing through its port (agent_runs/ports.py); imported here,
        # once the models are ready.
        from agent_runs import ports
        from billing.ports import BillingPort

        ports.billing.fill(BillingPort())
