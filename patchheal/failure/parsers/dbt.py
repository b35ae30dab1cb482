"""dbt's run summary: failing nodes, their SQL files, the database error.

`dbt build` / `dbt run` / `dbt test` end with one block per failing node:

    Failure in test assert_revenue_matches (tests/assert_revenue_matches.sql)
      Got 1 result, configured to fail if != 0
      compiled code at target/compiled/shop/tests/assert_revenue_matches.sql
    Runtime Error in model customer_revenue (models/customer_revenue.sql)
      Binder Error: Referenced column "amount" not found in FROM clause!

Each failing node becomes a test id (`model.customer_revenue`,
`test.not_null_orders_id`); the first node's error is the headline, its SQL
file and compiled SQL the frames. The log's timestamps (`14:02:13  `) are dropped.
"""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure, RawException, RawFrame

MARKERS = ("Running with dbt=", "Completed with ", "Error in model ", "Failure in test ")

_STAMP = re.compile(r"^\d\d:\d\d:\d\d(?:\.\d+)?\s+", re.MULTILINE)
_HEAD = re.compile(
    r"^(?P<kind>Failure|(?:Runtime|Database|Compilation|Dependency|Parsing) Error|Error) "
    r"in (?P<node>model|test|seed|snapshot|unit_test|sql_operation|analysis) "
    r"(?P<name>[\w.-]+)(?: \((?P<path>[^)]+)\))?\s*$"
)
_COMPILED = re.compile(r"^\s*compiled (?:code|SQL) at (?P<path>\S+)")
# "Binder Error: ..." / "Catalog Error: ..." (DuckDB), "column ... does not exist" (Postgres)
_DB_ERROR = re.compile(r"^\s*(?P<type>[A-Z]\w* Error|[A-Z]\w*Error): (?P<msg>.+)$")


def _type(kind: str) -> str:
    if kind == "Failure":
        return "dbt.TestFailure"
    return "dbt." + kind.replace(" ", "")


def parse(text: str) -> ParsedFailure:
    """Failing nodes of a dbt summary; empty when the text has none."""
    lines = _STAMP.sub("", text).splitlines()
    found = ParsedFailure(source="dbt")
    blocks: list[list[str]] = []
    for line in lines:
        head = _HEAD.match(line.strip())
        if head is not None:
            blocks.append([line.strip()])
        elif blocks and line.strip() and not line.startswith("Done. ") and len(blocks[-1]) < 12:
            blocks[-1].append(line.rstrip())
    for block in blocks:
        head = _HEAD.match(block[0])
        assert head is not None
        node_id = f"{head['node']}.{head['name']}"
        if node_id in found.failing_tests:
            continue
        found.failing_tests.append(node_id)
        error_type, message, frames = _type(head["kind"]), "", []
        if head["path"]:
            frames.append(RawFrame(file=head["path"], function=node_id))
        for line in block[1:]:
            if compiled := _COMPILED.match(line):
                frames.append(RawFrame(file=compiled["path"], function=node_id))
            elif not message:
                db = _DB_ERROR.match(line)
                if db is not None:
                    error_type, message = f"dbt.{db['type'].replace(' ', '')}", db["msg"].strip()
                else:
                    message = line.strip()
        if not found.error_type:
            found.error_type, found.message, found.frames = error_type, message, frames
        else:
            found.chain.append(RawException(error_type, message, frames))
    found.block = "\n".join(line for block in blocks for line in block)
    return found
