"""Job specs as TOML text and from flags: `heal --print-spec` and `heal --repo … --step …`."""

from __future__ import annotations

from typing import Any

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


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table, e.g. [job] matrix
        pairs = (f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _toml(data: dict[str, Any]) -> str:
    out: list[str] = []
    order = ["job", "steps", "regression", "proposer", "proposers", "budget", "policy"]
    for key in sorted(data, key=lambda k: order.index(k) if k in order else 99):
        value = data[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                out.append(f"[[{key}]]")
                out.extend(f"{k} = {_toml_value(v)}" for k, v in item.items())
                out.append("")
        elif isinstance(value, dict):
            out.append(f"[{key}]")
            out.extend(f"{k} = {_toml_value(v)}" for k, v in value.items())
            out.append("")
    return "\n".join(out)
