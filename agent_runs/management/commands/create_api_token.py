from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.services.tokens import api_token_create


class Command(BaseCommand):
    help = (
        "Create the user if missing and print a new API token (the only line on stdout). "
        "Scopes: read (every GET and stream), write (creating, cancelling, answering, "
        "uploading, deleting); a key with write has read too."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the key is for (shown in lists).")
        parser.add_argument(
            "--scopes", default="read,write", help="read or read,write (default: read,write)."
        )
        parser.add_argument(
            "--expires-in", type=int, metavar="DAYS", help="Days until it expires (default: never)."
        )

    def handle(self, *args: object, **options: object) -> None:
        days = options["expires_in"]
        if days is not None and (not isinstance(days, int) or days < 1):
            raise CommandError("--expires-in is a number of days, at least 1")
        scopes = [scope.strip() for scope in str(options["scopes"]).split(",") if scope.strip()]
        try:
            raw_key = api_token_create(
                username=str(options["username"]),
                name=str(options["name"]),
                scopes=scopes,
                expires_in=timedelta(days=days) if isinstance(days, int) else None,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(raw_key)
