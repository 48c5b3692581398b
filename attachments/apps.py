from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "attachments"

    def ready(self) -> None:
        # The run core calls attachments through its port (agent_runs/ports.py); imported
        # here, once the models are ready.
        from agent_runs import ports
        from attachments.ports import AttachmentsPort

        ports.attachments.fill(AttachmentsPort())
