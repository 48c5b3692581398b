from django.apps import AppConfig


class AgentRunsConfig(AppConfig):
    name = "agent_runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        # A bad system_agents.yaml stops the service at start-up, with the reason.
        from agent_runs.agent_config import system_agents

        system_agents()
