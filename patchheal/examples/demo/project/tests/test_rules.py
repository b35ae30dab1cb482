from decimal import Decimal

from pricing import bulk_discount_percent, order_total, shipping_cost


def test_no_discount_below_ten():
    assert bulk_discount_percent(9) == 0


def test_bulk_discount_starts_at_ten():
    assert bulk_discount_percent(10) == 10


def test_large_orders_get_fifteen_percent():
    assert bulk_discount_percent(50) == 15


def test_shipping_is_free_from_one_hundred():
    assert shipping_cost(Decimal("100.00")) == Decimal("0.00")
    assert shipping_cost(Decimal("99.99")) == Decimal("4.95")


def test_order_total_applies_discount_and_shipping():
    assert order_total(Decimal("2.50"), 12) == Decimal("31.95")
