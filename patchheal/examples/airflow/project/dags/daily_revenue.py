"""Every day: the revenue of the orders placed that day."""

from __future__ import annotations

import pendulum
from airflow.decorators import dag, task
from shop.orders import orders_on, revenue_cents


@dag(
    dag_id="daily_revenue",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["shop"],
)
def daily_revenue() -> None:
    @task
    def summarize(ds: str | None = None) -> int:
        day = pendulum.parse(ds).date()
        orders = orders_on(day)
        total = revenue_cents(orders)
        print(f"{day}: {len(orders)} orders, {total} cents")
        return total

    summarize()


daily_revenue()
