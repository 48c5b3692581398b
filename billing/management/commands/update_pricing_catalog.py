"""Update the pricing catalog from LiteLLM's bundled catalog (offline) or from a JSON/YAML
file (format: billing/catalog.py and docs/billing.md, "Pricing catalog file")."""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.catalog import (
    CatalogError,
    file_catalog_prices,
    litellm_catalog_prices,
    load_catalog_file,
    load_litellm_model_cost,
)
from billing.services import pricing_catalog_update


class Command(BaseCommand):
    help = (
        "Add catalog entries for new or changed model prices, from LiteLLM's bundled catalog "
        "or from FILE. Prints added / changed / unchanged counts; changes nothing on error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", type=Path, help="a JSON or YAML catalog file")
        parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
        parser.add_argument("--models", help="comma-separated model ids to update, e.g. a/b,c/d")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path | None = options["file"]
        models = {m.strip() for m in (options["models"] or "").split(",") if m.strip()} or None
        try:
            if path is None:
                prices = litellm_catalog_prices(
                    load_litellm_model_cost(), providers=settings.BILLING_CATALOG_PROVIDERS
                )
            else:
                prices = file_catalog_prices(load_catalog_file(path), default_source=path.name)
            result = pricing_catalog_update(
                prices=prices, models=models, dry_run=options["dry_run"]
            )
        except CatalogError as exc:
            raise CommandError(f"catalog not updated: {exc}") from exc
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            # A catalog entry of a shape the mapping does not expect (say, a range that is
            # not numbers, or a price too large to hold).
            raise CommandError(f"catalog not updated: malformed price data ({exc!r})") from exc
        for model_id in result.added:
            self.stdout.write(f"added {model_id}", self.style.SUCCESS)
        for model_id in result.changed:
            self.stdout.write(f"changed {model_id}", self.style.WARNING)
        prefix = "dry run, nothing saved: " if options["dry_run"] else ""
        self.stdout.write(
            f"{prefix}{len(result.added)} added, {len(result.changed)} changed, "
            f"{len(result.unchanged)} unchanged"
        )
