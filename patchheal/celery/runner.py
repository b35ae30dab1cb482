"""One queued job healed in the worker's process: the same path as `patchheal heal`."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchheal.errors import EXIT_INTERRUPTED, BadInput, Interrupted, PatchhealError
from patchheal.scrub.scrubber import scrub


def scrubbed(value: Any) -> Any:
    """`value` with every string scrubbed: results travel to the broker's backend."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {key: scrubbed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(item) for item in value]
    return value


def heal_once(
    spec_toml: str,
    spec_dir: str,
    state: dict[str, Any],
    *,
    resume: bool,
    queue_attempt: int,
    say: Callable[[str], None],
) -> tuple[int, dict[str, Any]]:
    """Heal one job spec (TOML text). Returns the exit code and the `--json` summary."""
    from patchheal.config import build_spec
    from patchheal.loop.controller import HealLoop, HealOptions
    from patchheal.loop.summary import json_summary

    try:
        raw = tomllib.loads(spec_toml)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"queued job spec is not TOML: {exc}") from None
    spec = build_spec(raw, source="(queued job)", base_dir=Path(spec_dir))
    options = HealOptions(
        state_dir=Path(state["state_dir"]),
        db=state["db"],
        reports_dir=Path(state["reports_dir"]),
        keep_worktrees=bool(state.get("keep", False)),
        resume=resume,
        queue_attempt=queue_attempt,
        say=say,
    )
    try:
        result = HealLoop(spec, spec_toml, options).run()
    except Interrupted as exc:
        partial = getattr(exc, "result", None)
        summary = (
            json_summary(partial.report, partial.report_paths)
            if partial is not None
            else {"job_id": spec.job.id, "status": "interrupted"}
        )
        return EXIT_INTERRUPTED, scrubbed(summary)
    except PatchhealError as exc:
        return exc.exit_code, scrubbed(
            {"job_id": spec.job.id, "status": "error", "retryable": False, "error": str(exc)}
        )
    return result.exit_code, scrubbed(json_summary(result.report, result.report_paths))
