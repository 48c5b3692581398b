"""Pricing catalog updates: a new entry for each model whose price changed (docs/billing.md)."""

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from billing import selectors
from billing.catalog import CatalogError, CatalogPrice, tiers_key
from billing.models import PriceCatalogEntry, PriceTier


@dataclass
class CatalogUpdate:
    """What ``pricing_catalog_update`` did (or would do, on a dry run), by model id."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@transaction.atomic
def pricing_catalog_update(
    *,
    prices: Sequence[CatalogPrice],
    models: Collection[str] | None = None,
    dry_run: bool = False,
) -> CatalogUpdate:
    """Bring the catalog in line with ``prices`` (only ``models``, if given).

    A model whose latest entry has other prices or currency gets a new entry, effective from
    the price's ``effective_from`` (default: now), which must be later than that entry's:
    earlier entries, and the costs recorded with them, stay as they were. Running it again
    with the same prices changes nothing. All or nothing: ``CatalogError`` changes nothing.
    """
    prices = prices if models is None else _prices_of(prices, models)
    now = timezone.now()
    latest = selectors.price_entries_latest(model_ids=[price.model_id for price in prices])
    result = CatalogUpdate()
    for price in prices:
        current = latest.get(price.model_id)
        if current is not None and _same_price(current, price):
            result.unchanged.append(price.model_id)
            continue
        effective_from = _effective_from(price, current, now)
        (result.added if current is None else result.changed).append(price.model_id)
        if not dry_run:
            _entry_create(price=price, effective_from=effective_from)
    if result.added or result.changed:
        # Not needed for correctness (usage_record finds a stale entry), it saves the miss.
        selectors.catalog_prices.clear()
    return result


def _prices_of(prices: Sequence[CatalogPrice], models: Collection[str]) -> list[CatalogPrice]:
    unknown = sorted(set(models) - {price.model_id for price in prices})
    if unknown:
        raise CatalogError(f"not in the catalog source: {', '.join(unknown)}")
    return [price for price in prices if price.model_id in models]


def _effective_from(
    price: CatalogPrice, current: PriceCatalogEntry | None, now: datetime
) -> datetime:
    """When the new price starts: later than the entry it follows, or ``CatalogError``."""
    effective_from = price.effective_from or now
    if current is not None and effective_from <= current.effective_from:
        raise CatalogError(
            f"{price.model_id}: its price differs from the entry effective from "
            f"{current.effective_from.isoformat()}; a new price needs a later effective_from"
        )
    return effective_from


def _same_price(entry: PriceCatalogEntry, price: CatalogPrice) -> bool:
    tiers = selectors.price_of(entry).tiers
    return entry.currency == price.currency and tiers_key(tiers) == tiers_key(price.tiers)


def _entry_create(*, price: CatalogPrice, effective_from: Any) -> PriceCatalogEntry:
    entry = PriceCatalogEntry.objects.create(
        model_id=price.model_id,
        currency=price.currency,
        source=price.source[:200],
        source_url=price.source_url,
        effective_from=effective_from,
    )
    PriceTier.objects.bulk_create(PriceTier(entry=entry, **asdict(tier)) for tier in price.tiers)
    return entry
