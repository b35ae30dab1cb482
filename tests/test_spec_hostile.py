"""Spec values that once ended in an internal error get exit 2 and a one-line reason
(issue 25, item 6: 20 internal errors, 8 distinct, over 3,529 fuzzed specs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from patchheal.cli import main
from patchheal.config import PolicySpec
from patchheal.errors import EXIT_BAD_INPUT
from patchheal.gates.policy import check_candidate
from tests.specfuzz import to_toml, valid_spec


def _exit_and_error(
    tmp_path: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(data))
    try:
        main(["heal", str(spec), "--print-spec"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda d, t: d["steps"][0].update(results="a/" * 600 + "*.xml"), "results"),
        (lambda d, t: d["steps"][0].update(results="."), "matches no file"),
        (lambda d, t: d["job"].update(harness="h" * 300), "longer than 255 bytes"),
        (
            lambda d, t: d.update(
                proposer={"kind": "llm", "base_url": "http://[::1", "model": "m"}
            ),
            "not a usable URL",
        ),
        (lambda d, t: d["job"].update(repo=str(t / "loop")), "a symlink loop"),
        (lambda d, t: d["steps"][0].update(log="loop"), "a symlink loop"),
        (lambda d, t: d["steps"][0].update(junit="loop"), "a symlink loop"),
        (lambda d, t: d["proposer"].update(dir="loop"), "a symlink loop"),
        (
            lambda d, t: d.update(proposer={"kind": "patchfiles", "paths": ["loop"]}),
            "a symlink loop",
        ),
    ],
)
def test_each_form_that_crashed_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, why: str
) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    data = valid_spec(tmp_path)
    mutate(data, tmp_path)
    code, err = _exit_and_error(tmp_path, data, capsys)
    assert code == EXIT_BAD_INPUT, err
    assert why in err
    assert "unexpected error" not in err
    assert "Traceback" not in err


def test_the_policy_gate_refuses_an_oversized_patch_before_any_per_file_work() -> None:
    """The size check comes first: a patch over 60,001 files once took 319 s (one
    `git show` per file) to be refused; no pre-patch file is read for it now."""
    diff = "".join(
        f"--- a/f{i}.py\n+++ b/f{i}.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n" for i in range(2000)
    )
    read: list[str] = []

    def original(path: str) -> str:
        read.append(path)
        time.sleep(0.001)
        return "a = 1\n"

    decision = check_candidate(diff, PolicySpec(max_files=5), original=original)
    assert decision.rule == "size"
    assert read == []
