"""Job specs as TOML text and from flags: `heal --print-spec` and `heal --repo … --step …`."""

from __future__ import annotations

from typing import Any

import tomli_w

from patchheal.config import JobSpec
from patchheal.errors import SpecError


def spec_from_flags(
    *,
    job_id: str,
    repo: str,
    base: str,
    steps: list[str],
    proposer: str | None,
    harness: str,
    regression: str | None,
) -> dict[str, Any]:
    """The raw spec that `patchheal heal --repo … --step …` describes."""
    data: dict[str, Any] = {
        "job": {"id": job_id, "repo": repo, "base": base, "harness": harness},
        "steps": [{"name": f"step-{i + 1}", "command": c} for i, c in enumerate(steps)],
    }
    if regression:
        data["regression"] = {"command": regression}
    if proposer:
        kind, _, arg = proposer.partition(":")
        if kind == "patchfiles":
            data["proposer"] = {"kind": "patchfiles", "dir": arg}
        elif kind == "agent":
            data["proposer"] = {"kind": "agent", "command": arg}
        else:
            raise SpecError(f"--proposer must be patchfiles:DIR or agent:COMMAND, got {proposer!r}")
    return data


def spec_to_toml(spec: JobSpec) -> str:
    """Render a spec as TOML (for `heal --print-spec`)."""
    dumped = spec.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    dumped.setdefault("job", {})["id"] = spec.job.id
    # `kind` is a default on each proposer config, but it is what selects it.
    if spec.proposer is not None:
        dumped["proposer"] = {"kind": spec.proposer.kind, **dumped.get("proposer", {})}
    if spec.proposers:
        dumped["proposers"] = [
            {"kind": c.kind, **d} for c, d in zip(spec.proposers, dumped["proposers"], strict=True)
        ]
    return _toml(dumped)


_ORDER = ("job", "steps", "regression", "proposer", "proposers", "budget", "policy")


def _toml(data: dict[str, Any]) -> str:
    """The spec as TOML: every value written by tomli-w, which escapes what TOML cannot hold
    raw (control characters, quotes, backslashes; the hand-written writer this replaced
    did not, and `heal` refused a spec it printed for a step with an ESC in it). Sections
    come in the order of a hand-written spec, arrays of tables as `[[steps]]` blocks."""

    def rank(key: str) -> tuple[bool, int]:
        # Plain values first: after a [table] header they would belong to that table.
        table = isinstance(data[key], dict) or _is_array_of_tables(data[key])
        return table, _ORDER.index(key) if key in _ORDER else len(_ORDER)

    chunks: list[str] = []
    for key in sorted(data, key=rank):
        value = data[key]
        if _is_array_of_tables(value) and not any(
            isinstance(v, dict) for item in value for v in item.values()
        ):
            # tomli-w writes a short array of tables inline, at the top; a spec reads better
            # as blocks. Flat tables only: a nested one stays tomli-w's to place.
            chunks.extend(f"[[{key}]]\n{tomli_w.dumps(item)}" for item in value)
        else:
            chunks.append(tomli_w.dumps({key: value}))
    return "\n".join(chunks)


def _is_array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
