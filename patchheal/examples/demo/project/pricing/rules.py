"""Pricing rules of the demo shop.

Bulk discounts are tiered by quantity: 10 items or more get 10 % off,
50 items or more get 15 % off. Shipping is free from 100.00 upwards.
"""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
FREE_SHIPPING_FROM = Decimal("100.00")
FLAT_SHIPPING = Decimal("4.95")


def bulk_discount_percent(quantity: int) -> int:
    """The bulk discount, in percent, for an order line of `quantity` items."""
    if quantity >= 50:
        return 15
    if quantity > 10:
        return 10
    return 0


def shipping_cost(subtotal: Decimal) -> Decimal:
    """Flat shipping below the free-shipping threshold."""
    if subtotal >= FREE_SHIPPING_FROM:
        return Decimal("0.00")
    return FLAT_SHIPPING


def order_total(unit_price: Decimal, quantity: int) -> Decimal:
    """Line price after the bulk discount, plus shipping, rounded to cents."""
    gross = unit_price * quantity
    discount = gross * bulk_discount_percent(quantity) / 100
    subtotal = (gross - discount).quantize(CENT, rounding=ROUND_HALF_UP)
    return subtotal + shipping_cost(subtotal)
