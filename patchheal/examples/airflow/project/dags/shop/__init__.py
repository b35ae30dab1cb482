"""The shop's order data, shared by its DAGs."""
