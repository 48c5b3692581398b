from django.apps import AppConfig


class AgentRunsConfig(AppConfig):
    name = "agent_runs"
    verbose_name = "Agent runs"
