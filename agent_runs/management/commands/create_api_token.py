from django.core.management.base import BaseCommand, CommandParser

from agent_runs.services.tokens import api_token_create


class Command(BaseCommand):
    help = "Create the user if missing and print a new API token (the only line on stdout)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: object, **options: str) -> None:
        self.stdout.write(api_token_create(username=options["username"]))
