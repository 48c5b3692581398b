"""Chat models by model id (DESIGN.md, "Model configuration"): ``demo``, the offline model,
or ``openai/<model>`` on any OpenAI-compatible endpoint. Keys and endpoints come from the
environment. DeepSeek and DashScope join with the pipeline work."""

from agentscope.credential import OpenAICredential
from agentscope.model import ChatModelBase, OpenAIChatModel
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agent_runs.demo_model import DEMO_MODEL_ID, DemoChatModel


def chat_model_for(model_id: str) -> ChatModelBase:
    if model_id == DEMO_MODEL_ID:
        return DemoChatModel()
    provider, _, name = model_id.partition("/")
    if provider == "openai" and name:
        if not settings.OPENAI_API_KEY:
            raise ImproperlyConfigured(f"{model_id} needs OPENAI_API_KEY")
        credential = OpenAICredential(
            api_key=settings.OPENAI_API_KEY, base_url=settings.OPENAI_BASE_URL or None
        )
        return OpenAIChatModel(
            credential=credential,
            model=name,
            max_retries=settings.AGENT_MODEL_MAX_RETRIES,
            retry_delay=settings.AGENT_MODEL_RETRY_DELAY_SECONDS,
            # One retry layer only: AgentScope's, configured above.
            client_kwargs={"max_retries": 0, "timeout": settings.AGENT_MODEL_TIMEOUT_SECONDS},
        )
    raise ImproperlyConfigured(f"unknown model id {model_id!r}: use 'demo' or 'openai/<model>'")
