"""No malformed job spec ends in an internal error or a hang: a clear message and exit 2."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from types import FrameType

import pytest

from patchheal.cli import main
from patchheal.errors import EXIT_BAD_INPUT, BadInput
from tests.specfuzz import cases, to_toml, valid_spec

CASES = 600
PER_CASE_SECONDS = 5


class Hung(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise Hung


def _print_spec(spec: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`patchheal heal SPEC --print-spec` in-process: (exit code, stderr)."""
    try:
        main(["heal", str(spec), "--print-spec"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _clear(err: str) -> bool:
    """patchheal's own refusal, or click's usage error for the JOB_FILE argument."""
    own = err.startswith("patchheal: ") and "unexpected error" not in err
    return (own or "\nError: Invalid value" in err) and len(err.strip()) > 20


def _what_a_run_does_next(spec_path: Path) -> None:
    """A spec that loads is used: its proposers are built, its globs compiled, its results
    globs matched in a worktree and its harness looked up."""
    from patchheal.config import load_spec
    from patchheal.gates.policy import path_matches
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.results.untrusted import Budget, read_glob
    from patchheal.proposers.registry import create_proposer

    spec = load_spec(spec_path)
    for step in spec.steps:
        if step.results:
            read_glob(spec_path.parent, step.results, Budget())
    if spec.job.harness not in ("auto", "local"):
        load_harness(spec.job.harness, spec_path.parent)
    for config in spec.proposer_chain:
        create_proposer(config, job=spec)
    path_matches("src/a.py", [*spec.policy.protected_paths, *spec.policy.extra_protected_paths])
    path_matches("tests/test_a.py", spec.policy.test_paths)


def test_the_valid_base_spec_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The mutations start from a spec that is accepted (so refusals are the mutations' doing)."""
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(valid_spec(tmp_path)))
    assert _print_spec(spec, capsys) == (0, "")
    _what_a_run_does_next(spec)


def test_malformed_specs_are_refused_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over 500 seeded malformed specs: every one is accepted or refused with exit 2 and a
    message; none crashes (crash log, exit 1) and none runs past the per-case time limit."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    failures: list[str] = []
    tally: Counter[str] = Counter()
    try:
        for name, spec in cases(tmp_path, CASES):
            signal.alarm(PER_CASE_SECONDS)
            try:
                code, err = _print_spec(spec, capsys)
                if code == 0:
                    try:
                        _what_a_run_does_next(spec)
                        tally["accepted"] += 1
                    except BadInput as exc:
                        tally["refused when used"] += 1
                        if not str(exc).strip():
                            failures.append(f"{name}: refused without a message")
                elif code == EXIT_BAD_INPUT and _clear(err):
                    tally["refused"] += 1
                else:
                    failures.append(f"{name}: exit {code}: {err[:300]!r}")
            except Hung:
                failures.append(f"{name}: still running after {PER_CASE_SECONDS}s")
            except Exception as exc:
                failures.append(f"{name}: {exc!r}")
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(dict(tally))
    assert failures == [], "\n".join(failures[:30])
    assert sum(tally.values()) == CASES >= 500
    assert tally["refused"] + tally["refused when used"] > CASES // 2


@pytest.mark.parametrize(
    ("proposer", "message"),
    [
        ({"kind": "llmm"}, "unknown kind 'llmm'; known: patchfiles, llm, agent, scripted"),
        ({"dir": "x"}, "needs a kind (patchfiles, llm, agent or scripted)"),
    ],
)
def test_a_typo_in_the_proposer_kind_is_named_in_the_specs_words(
    tmp_path: Path, proposer: dict[str, str], message: str
) -> None:
    """Regression: a typo'd kind answered "Input tag 'llmm' found using 'kind' does not
    match any of the expected tags"."""
    from patchheal.config import build_spec
    from patchheal.errors import SpecError

    data = {**valid_spec(tmp_path), "proposer": proposer}
    with pytest.raises(SpecError) as caught:
        build_spec(data, source="job.toml", base_dir=tmp_path)
    assert f"proposer: {message}" in str(caught.value)
