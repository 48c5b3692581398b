"""The AgentScope Agent API (docs/protocols/agent-api.md): ``POST /api/v1/agent/process`` and
its response objects, over the run core."""
