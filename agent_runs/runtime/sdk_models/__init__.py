"""Anthropic, Gemini and Ollama models: AgentScope's own chat models on their providers'
SDKs (docs/configuration.md, "Models"), each call recorded into the stage's ``UsageLog``
with the provider's raw usage object, which AgentScope's parsing drops (spec
sse-events-and-usage.md 5.2: the metadata fills what the direct fields lack).

This package, and the SDKs it uses, are imported only when such a model is configured
(``chat_model_for``): the worker of an OpenAI-compatible provider never loads them. One
module per provider, beside ``recorded``, their base.

An SDK's client holds a connection pool bound to its event loop: one is made per loop and
configuration on the first call and kept for the next ones (a model is made per stage), as
the lean OpenAI-compatible path keeps its own (runtime/openai_compatible.py). The SDKs'
own retries are off: AgentScope retries (``AGENT_MODEL_MAX_RETRIES``), no layer below it.

An SDK's error is raised as the lean path's ``ProviderError`` (runtime/provider_errors.py) of
the same kind (connection, timeout, the status's class): the same errors are retried (a
connection error, a timeout, a 429, a 5xx) and a run that fails on one ends with the
``model_error`` code, whatever the
provider.
"""

from agent_runs.runtime.sdk_models.anthropic_model import AnthropicModel
from agent_runs.runtime.sdk_models.gemini_model import GeminiModel
from agent_runs.runtime.sdk_models.ollama_model import OllamaModel
from agent_runs.runtime.sdk_models.recorded import RecordedSDKModel, sdk_clients_close

__all__ = ["AnthropicModel", "GeminiModel", "OllamaModel", "RecordedSDKModel", "sdk_clients_close"]
