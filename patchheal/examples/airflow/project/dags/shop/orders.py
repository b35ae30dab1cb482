"""Orders as the checkout service exports them: one CSV row per order."""

from __future__ import annotations

import csv
from datetime import date, datetime
from pathlib import Path

EXPORT = Path(__file__).parent / "data" / "orders.csv"


def parse_order_time(text: str) -> datetime:
    """When an order was placed, as the export writes it."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


def orders_on(day: date, export: Path = EXPORT) -> list[dict[str, str]]:
    """The orders placed on `day` (UTC)."""
    with export.open(newline="") as stream:
        return [row for row in csv.DictReader(stream) if parse_order_time(row["ordered_at"]).date() == day]


def revenue_cents(orders: list[dict[str, str]]) -> int:
    return sum(int(row["amount_cents"]) for row in orders)
