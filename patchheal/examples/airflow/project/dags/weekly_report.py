"""Every Monday: when the last order of the export was placed."""

from __future__ import annotations

import csv

import pendulum
from airflow.decorators import dag, task
from shop.orders import EXPORT, parse_order_time


@dag(
    dag_id="weekly_report",
    schedule="0 6 * * 1",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["shop"],
)
def weekly_report() -> None:
    @task
    def last_order() -> str:
        with EXPORT.open(newline="") as stream:
            stamps = [parse_order_time(row["ordered_at"]) for row in csv.DictReader(stream)]
        return max(stamps).isoformat()

    last_order()


weekly_report()
