"""The OpenAI Responses API (docs/protocols/openai-responses.md) under ``/openai/v1/``, over
the run core."""
