"""Which Node a job's step runs on, and the harness image that has it.

The node harness offers one Node per Debian suite that the package mirror
serves, in its `[nodes]` table (major -> suite: bullseye 12, bookworm 18,
trixie 20). The job chooses with `node = "20"` in [job]; else the failing CI
job's setup-node `node-version`, else the repository (`nodesource.py`). A Node
the harness does not offer is refused with the nearest one it does, never
silently replaced (`runtimes.py`, shared with the Pythons).
"""

from __future__ import annotations

from pathlib import Path

from patchheal.harness.config import HarnessDef
from patchheal.harness.inference import runtimes
from patchheal.harness.inference.nodesource import allows, evidence_at, major
from patchheal.harness.inference.runtimes import Runtime

NODE = Runtime(
    label="Node",
    field="node",
    example="20",
    key=lambda version: (int(version),),
    parse=major,
    allows=allows,
    evidence=evidence_at,
    setup_action="setup-node",
    plausible=tuple(str(m) for m in range(0, 40)),
)


def offered(defn: HarnessDef) -> list[str]:
    """The Nodes `defn` offers, oldest first."""
    return runtimes.offered(NODE, defn)


def choose(
    defn: HarnessDef, repo: Path, base: str, wanted: str | None, workflow_node: str | None = None
) -> tuple[HarnessDef, str]:
    """The definition with the job's Node (`wanted`: its `node`; `workflow_node`: what the
    failing CI job's setup-node asked for), and the sentence saying which and why."""
    return runtimes.choose(NODE, defn, repo, base, wanted, workflow_node)
