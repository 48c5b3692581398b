from django.apps import AppConfig


class AgentRunsConfig(AppConfig):
    name = "agent_runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        # A bad system_agents.yaml stops the service at start-up, with the reason.
        from agent_runs.agent_config import system_agents

        system_agents()
        # The receivers of run_status_changed (the push outbox's), named by dotted path in
        # AGENT_RUN_STATUS_RECEIVERS, connected in every process: the web's and the workers'.
        from agent_runs.signals import run_status_receivers_connect

        run_status_receivers_connect()
