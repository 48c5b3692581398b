from django.apps import AppConfig


class AgentRunsConfig(AppConfig):
    name = "agent_runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        # A bad system_agents.yaml stops the service at start-up, with the reason.
        from agent_runs.agent_config import system_agents

        system_agents()
        # The edges' receivers of run_status_changed, named by dotted path (the core imports
        # no edge), connected in every process: the web's and the workers'.
        from agent_runs.signals import run_status_receivers_connect

        run_status_receivers_connect()
