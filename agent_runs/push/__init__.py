"""Push notifications (webhooks) from a durable outbox: configs, the outbox and its
deliveries (services), their reads (selectors), the deliveries' signature (signing) and the
receiver of ``run_status_changed`` that hands a run's change to the protocol that pushes it
(receivers). docs/push.md.

Its models stay in the ``agent_runs`` app (``agent_runs/models/push.py``): Django registers
an app's models from its models module, so models kept here would be imported by that module
anyway (the core's models importing this package), and a Django app of its own would move
their tables and migrations for nothing. A protocol (A2A) uses this package; the core's
user webhooks (services/webhooks.py) too; it imports no protocol."""
