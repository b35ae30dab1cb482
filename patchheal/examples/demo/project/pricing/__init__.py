"""Order pricing rules: bulk discounts, shipping and totals."""

from pricing.rules import bulk_discount_percent, order_total, shipping_cost

__all__ = ["bulk_discount_percent", "order_total", "shipping_cost"]
