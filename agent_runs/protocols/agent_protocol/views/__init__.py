"""The Agent Protocol's views (docs/protocols/agent-protocol.md): two URL sets over one core,
the spec set under ``/api/`` (spec.py) and the official v1 set under ``/ap/v1/agent/``
(v1.py), each stating only how it differs (its page query, its shapes, its statuses) over
the views and helpers both use (common.py)."""
