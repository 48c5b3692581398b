"""A2A 1.0 (and its 0.3 method names) over the run core: the agent card and JSON-RPC at
``/a2a``. docs/protocols/a2a.md."""
