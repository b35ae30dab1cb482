"""dbt's output parsed into the failure: failing nodes as test ids, SQL paths, the database error.

The inputs are real `dbt build` output (dbt-core 1.9.8, dbt-duckdb 1.9.4) of
examples/dbt before and after a wrong fix, colors and timestamps included.
"""

from __future__ import annotations

from pathlib import Path

from patchheal.failure import analysis
from patchheal.failure.parsers import dbt

DATA = Path(__file__).parent / "data" / "dbt"


def test_a_model_with_a_database_error() -> None:
    failure = analysis.from_text(
        (DATA / "build_binder_error.txt").read_text(), command="dbt build --select +x"
    )
    assert failure.source == "dbt"
    assert failure.failing_tests == ("model.customer_revenue",)
    assert failure.error_type == "dbt.BinderError"
    assert 'Referenced column "amount" not found in FROM clause' in failure.message
    assert [f.file for f in failure.frames] == ["models/customer_revenue.sql"]


def test_a_failing_data_test_points_at_its_compiled_sql() -> None:
    failure = analysis.from_text((DATA / "build_test_failure.txt").read_text())
    assert failure.source == "dbt"
    assert failure.failing_tests == ("test.assert_revenue_in_dollars",)
    assert failure.error_type == "dbt.TestFailure"
    assert "configured to fail if != 0" in failure.message
    files = [f.file for f in failure.frames]
    assert files[0] == "tests/assert_revenue_in_dollars.sql"
    assert files[1].endswith("target/compiled/shop/tests/assert_revenue_in_dollars.sql")


def test_the_two_failures_fingerprint_apart_and_stably() -> None:
    binder = (DATA / "build_binder_error.txt").read_text()
    failed_test = (DATA / "build_test_failure.txt").read_text()
    assert analysis.from_text(binder).fingerprint != analysis.from_text(failed_test).fingerprint
    # Another run's timestamps and durations do not change the fingerprint.
    later = binder.replace("11:04:", "23:59:").replace("0.49s", "3.10s")
    assert analysis.from_text(later).fingerprint == analysis.from_text(binder).fingerprint


def test_several_failing_nodes_are_all_test_ids_and_the_first_is_the_headline() -> None:
    text = (
        "12:00:00  Completed with 2 errors, 0 partial successes, and 0 warnings:\n"
        "12:00:00  Database Error in model orders (models/orders.sql)\n"
        '  Catalog Error: Table with name "raw" does not exist!\n'
        "12:00:00  Failure in test not_null_orders_id (models/schema.yml)\n"
        "12:00:00    Got 3 results, configured to fail if != 0\n"
        "12:00:00  Done. PASS=1 WARN=0 ERROR=2 SKIP=0 TOTAL=3\n"
    )
    parsed = dbt.parse(text)
    assert parsed.failing_tests == ["model.orders", "test.not_null_orders_id"]
    assert parsed.error_type == "dbt.CatalogError"
    assert len(parsed.chain) == 1
    assert parsed.chain[0].error_type == "dbt.TestFailure"


def test_output_without_failing_nodes_is_not_a_dbt_failure() -> None:
    assert not dbt.parse("12:00:00  Done. PASS=6 WARN=0 ERROR=0 SKIP=0 TOTAL=6\n").found
