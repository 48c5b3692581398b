from django.core.management.base import BaseCommand, CommandError

from agent_runs.mcp_servers import mcp_servers_report, offered_tool_name


class Command(BaseCommand):
    help = (
        "List each MCP tool server the agent configs name (system_agents.yaml, automation "
        "jobs) and the tools it offers, asking each anew; a server that cannot be reached "
        "says why. Exits 1 when one cannot."
    )

    def handle(self, *args: object, **options: object) -> None:
        report = mcp_servers_report(fresh=True)
        if not report:
            self.stdout.write("No MCP servers are configured.")
            return
        for configured, listing in report:
            server = configured.server
            approval = ", each call approved by a person" if server.require_approval else ""
            self.stdout.write(
                f"{server.name} ({configured.where}) {server.url} [{server.transport}{approval}]"
            )
            if listing.error is not None:
                self.stdout.write(self.style.ERROR(f"  unreachable: {listing.error}"))
            for tool in listing.tools:
                summary = (tool.description or "").strip().split("\n", 1)[0]
                self.stdout.write(f"  {offered_tool_name(server, tool.name)}: {summary}")
            if listing.error is None and not listing.tools:
                self.stdout.write("  (no tools offered)")
        unreachable = sum(1 for _, listing in report if listing.error is not None)
        if unreachable:
            raise CommandError(f"{unreachable} of {len(report)} MCP servers unreachable")
