"""The staff admin of the run core (docs/admin.md), one module per aggregate; importing the
package registers every page."""

from agent_runs.admin import automations, push, runs, users

__all__ = ["automations", "push", "runs", "users"]
