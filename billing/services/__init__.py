"""Writes of billing: a usage record per model call, its day's totals, and pricing catalog
updates."""

from billing.services.catalog import CatalogUpdate, pricing_catalog_update
from billing.services.daily import daily_usage_rebuild
from billing.services.usage import usage_record

__all__ = ["CatalogUpdate", "daily_usage_rebuild", "pricing_catalog_update", "usage_record"]
