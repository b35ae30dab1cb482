"""What a repository says about its Node, read at the failing commit.

Most trusted first: a pin (`.nvmrc`, `.node-version`, `.tool-versions`,
package.json's `volta.node`), then what CI runs (the workflows'
`node-version`), then the range package.json's `engines.node` allows. Files
are read at the base commit, as for Python (`pythonsource.py`); nothing is
executed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from patchheal.harness.inference.pythonsource import reader, workflow_files, workflow_versions
from patchheal.harness.inference.runtimes import Evidence

# nvm's names of the LTS lines (`lts/iron`), each one major.
_LTS = {"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12, "fermium": 14}
_LTS |= {"gallium": 16, "hydrogen": 18, "iron": 20, "jod": 22, "krypton": 24}
_VERSION = re.compile(r"^\s*(?:node(?:js)?[-@ ]?)?v?(\d{1,3})(?:\.(?:\d+|x|\*))*\s*$", re.I)
_OPERATOR_SPACE = re.compile(r"(>=|<=|>|<|=|~|\^)\s+")


def major(text: str) -> str | None:
    """'20' for '20', 'v20.11.1', '20.x', 'lts/iron'; None for 'lts/*', 'node', '>=18'."""
    text = text.strip()
    if text.lower().startswith("lts/"):
        line = _LTS.get(text[4:].lower())
        return str(line) if line else None
    match = _VERSION.match(text)
    return match.group(1) if match else None


def allows(spec: str, version: str) -> bool:
    """Whether an npm range (`engines.node`: '>=18', '^18 || ^20', '18.x') allows some
    release of major `version`; a range that does not parse says nothing (allows it)."""
    from semantic_version import NpmSpec, Version

    try:
        wanted = NpmSpec(_OPERATOR_SPACE.sub(r"\1", spec.strip()) or "*")
    except ValueError:
        return True
    return any(Version(f"{version}.{minor}.0") in wanted for minor in range(100))


def evidence_at(repo: Path, base: str) -> list[Evidence]:
    """Every source in the repository at `base` that names a Node, most trusted first."""
    read = reader(repo, base)
    found: list[Evidence] = []
    for name in (".nvmrc", ".node-version"):
        text = read(name)
        first = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
        if first and not first.startswith("#"):
            found.append(Evidence(name, [first], None))
    tools = read(".tool-versions") or ""
    for line in tools.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("nodejs", "node"):
            found.append(Evidence(".tool-versions", [parts[1]], None))
    package = _package(read("package.json"))
    volta = package.get("volta")
    if isinstance(volta, dict) and isinstance(volta.get("node"), str):
        found.append(Evidence("package.json's volta.node", [volta["node"]], None))
    for name in workflow_files(repo, base):
        versions = workflow_versions(read(name) or "", ("node-version", "node"), "setup-node")
        if versions:
            found.append(Evidence(f"the CI workflow {name}", versions, None))
    engines = package.get("engines")
    if isinstance(engines, dict) and isinstance(engines.get("node"), str):
        found.append(Evidence("package.json's engines.node", [], engines["node"]))
    return found


def _package(text: str | None) -> dict[str, object]:
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
