"""GitHub Actions expressions in a workflow job: what `${{ ... }}` stands for.

The chosen matrix entry (`strategy.matrix` with GitHub's `include`/`exclude`
rules, `--matrix X=V` picking one), the `env` mappings of the workflow, job and
step folded into one scope, and the expansion of `${{ matrix.X }}`,
`${{ env.X }}` and `${{ secrets.X }}` (a secret becomes a variable passed
through from the host by name, never a value) that `workflow.py` uses to derive
a job.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from patchheal.errors import SpecError

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _matrix_entry(body: dict[str, Any], wanted: dict[str, str], notes: list[str]) -> dict[str, str]:
    spec = (body.get("strategy") or {}).get("matrix")
    if not isinstance(spec, dict):
        if wanted:
            raise SpecError("--matrix was given but the job has no strategy.matrix")
        return {}
    axes = {
        k: v for k, v in spec.items() if k not in ("include", "exclude") and isinstance(v, list)
    }
    combos = [
        dict(zip(axes, (str(x) for x in values), strict=True))
        for values in itertools.product(*axes.values())
    ]
    for excluded in spec.get("exclude") or []:
        combos = [c for c in combos if not all(c.get(k) == str(v) for k, v in excluded.items())]
    # GitHub's rule: an `include` entry extends every original combination whose
    # axis values it does not contradict; one that extends none is an entry of its own.
    originals = list(combos)
    for raw_extra in spec.get("include") or []:
        extra = {str(k): str(v) for k, v in raw_extra.items()}
        hits = [c for c in originals if all(c[k] == v for k, v in extra.items() if k in axes)]
        for c in hits:
            c.update(extra)
        if not hits:
            combos.append(extra)
    unknown = set(wanted) - {k for c in combos for k in c}
    if unknown:
        raise SpecError(f"--matrix names {sorted(unknown)}, not axes of the job's matrix")
    matching = [c for c in combos if all(c.get(k) == v for k, v in wanted.items())]
    if not matching:
        shown = "; ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in combos)
        raise SpecError(f"no matrix entry has {wanted}; entries: {shown}")
    if len(combos) > 1:
        label = ", ".join(f"{k}={v}" for k, v in matching[0].items())
        notes.append(f"matrix entry {label} (1 of {len(combos)}; --matrix KEY=VALUE picks another)")
    return matching[0]


def _env(
    raw: Any,
    context: dict[str, dict[str, str]],
    inherited: dict[str, str],
    passthrough: list[str],
) -> dict[str, str]:
    if raw is None:
        return dict(inherited)
    if not isinstance(raw, dict):
        raise SpecError(f"`env` must be a mapping, got {raw!r}")
    out = dict(inherited)
    for key, value in raw.items():
        text = (
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        if re.fullmatch(r"\$\{\{\s*secrets\.\w+\s*\}\}", text):
            # A secret stays on the host: passed through by the step's variable name.
            passthrough.append(str(key))
            out.pop(str(key), None)
            continue
        out[str(key)] = _expand(text, context, passthrough, [])
    return out


def _expand(
    text: str, context: dict[str, dict[str, str]], passthrough: list[str], notes: list[str]
) -> str:
    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        scope, _, key = expr.partition(".")
        if scope in context and key in context[scope]:
            return context[scope][key]
        if scope == "secrets" and re.fullmatch(r"\w+", key):
            passthrough.append(key)
            return "${" + key + "}"
        notes.append(f"expression ${{{{ {expr} }}}} has no value here; left empty")
        return ""

    return _EXPR.sub(one, text)
