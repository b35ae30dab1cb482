"""Resume of a job with 10 verified steps vs a fresh run, up to the 11th step.

Run: python benchmarks/bench_resume.py [--steps 11] [--runs 3]

Generates a demo-like project (a `shop` package with one bug per module,
one pytest file per module, one job step per test file) and a job whose
proposer is a small coding-agent script that fixes the first bug it finds.

- fresh: `patchheal heal JOB.toml --max-proposer-calls 10` from nothing heals
  steps 1-10 (reproduce, propose, verify, checkpoint each) and stops at step
  11 (its proposer budget is spent);
- resume: `patchheal heal JOB.toml --resume` on a copy of the state that run
  left (10 checkpoints): it replays the 10 checkpoints onto a fresh worktree
  of the base, verifying every file's checksum, and goes on with step 11.

Both are timed as real processes, from launch to the `step.started` event of
step 11 (Python start-up included), with a fresh worktree root each time so
neither reuses the other's private repository. The replay alone is also shown
(the resumed run's `job.started` to step 11). Medians over --runs, the ratio
resume/fresh, and the target: resume well under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}
JOB = "bench-resume"
TARGET_SECONDS = 60.0

# The proposer: fixes the first module that still has the bug (on a step's starting
# point that is the step's own module, since earlier steps are fixed there).
FIXER = """\
import pathlib
mods = sorted(pathlib.Path("shop").glob("rule_*.py"), key=lambda p: int(p.stem[5:]))
for mod in mods:
    text = mod.read_text()
    if "price - discount  # bug" in text:
        mod.write_text(text.replace("price - discount  # bug", "price - price * discount"))
        print("STRATEGY: fix_logic")
        break
"""


def make_project(root: Path, steps: int) -> Path:
    repo = root / "shop-repo"
    (repo / "shop").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "shop"\nversion = "0"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n'
    )
    (repo / "shop" / "__init__.py").write_text("")
    for n in range(1, steps + 1):
        (repo / "shop" / f"rule_{n}.py").write_text(
            f'"""Pricing rule {n}."""\n\n\ndef discounted_{n}(price, discount):\n'
            f'    """`discount` is a fraction of the price."""\n'
            f"    return price - discount  # bug\n"
        )
        (repo / "tests" / f"test_rule_{n}.py").write_text(
            f"from shop.rule_{n} import discounted_{n}\n\n\n"
            f"def test_discount_{n}():\n    assert discounted_{n}(200, 0.25) == 150\n\n\n"
            f"def test_no_discount_{n}():\n    assert discounted_{n}(80, 0) == 80\n"
        )
    env = {**os.environ, **_ENV}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "shop"]):
        subprocess.run(["git", *argv], cwd=repo, check=True, env=env)
    return repo


def write_job(root: Path, repo: Path, steps: int) -> Path:
    fixer = root / "fixer.py"
    fixer.write_text(FIXER)
    lines = ["[job]", f'id = "{JOB}"', f'repo = "{repo}"', 'base = "main"', 'harness = "local"', ""]
    for n in range(1, steps + 1):
        lines += [
            "[[steps]]",
            f'name = "rule-{n}"',
            f"command = '{sys.executable} -m pytest -q -p no:cacheprovider tests/test_rule_{n}.py'",
            "",
        ]
    lines += ["[proposer]", 'kind = "agent"', f"command = '{sys.executable} {fixer}'", ""]
    job = root / "job.toml"
    job.write_text("\n".join(lines))
    return job


def run(
    job: Path, state: Path, wt_root: Path, target: int, *extra: str
) -> tuple[float, float, int]:
    """(launch → step `target` started, job.started → it, exit code) of one heal process."""
    env = {**os.environ, **_ENV, "PATCHHEAL_WORKTREE_ROOT": str(wt_root)}
    args = ["--db", str(state / "store.sqlite3"), "--state-dir", str(state / "var")]
    args += ["--reports", str(state / "reports")]
    events = state / "var" / "runs" / JOB / "events.jsonl"
    skip = len(events.read_text().splitlines()) if events.exists() else 0
    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "heal", str(job), *args, *extra],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"heal failed ({done.returncode}):\n{done.stderr}")
    mine = [json.loads(line) for line in events.read_text().splitlines()[skip:]]
    started = next(e["time"] for e in mine if e["type"] == "job.started")
    reached = next(
        e["time"] for e in mine if e["type"] == "step.started" and e["step_index"] == target
    )
    return reached - launched, reached - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=11, help="steps in the job (resume at last)")
    parser.add_argument("--runs", type=int, default=3, help="measurements of each kind")
    opts = parser.parse_args()
    done_steps = opts.steps - 1
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        root = Path(tmp)
        repo = make_project(root, opts.steps)
        job = write_job(root, repo, opts.steps)
        fresh: list[float] = []
        snapshot = root / "snapshot"
        for i in range(opts.runs):
            state = root / f"fresh-{i}"
            budget = ("--max-proposer-calls", str(done_steps))
            to_target, _, code = run(job, state, root / f"wt-fresh-{i}", opts.steps, *budget)
            assert code == 1, "the fresh run should stop at its last step"
            fresh.append(to_target)
            if i == 0:
                shutil.copytree(state, snapshot)
        resumed: list[float] = []
        replays: list[float] = []
        for i in range(opts.runs):
            state = root / f"resume-{i}"
            shutil.copytree(snapshot, state)
            to_target, replay_part, code = run(
                job, state, root / f"wt-resume-{i}", opts.steps, "--resume"
            )
            assert code == 0, "the resumed run should heal the last step"
            resumed.append(to_target)
            replays.append(replay_part)
    f, r, p = (statistics.median(x) for x in (fresh, resumed, replays))
    print(f"job of {opts.steps} steps, {done_steps} verified; medians of {opts.runs} runs each")
    print(f"{'run':<58}{'median s':>10}{'ratio':>8}")
    print(f"{f'fresh: launch -> step {opts.steps} started':<58}{f:>10.2f}{1.0:>8.2f}")
    print(f"{f'resume: launch -> step {opts.steps} started':<58}{r:>10.2f}{r / f:>8.2f}")
    label = f"resume: job.started -> step {opts.steps} ({done_steps} replays)"
    print(f"{label:<58}{p:>10.2f}{p / f:>8.2f}")
    verdict = "met" if r < TARGET_SECONDS else "MISSED"
    print(f"target: resume under {TARGET_SECONDS:g} s: {verdict} ({r:.2f} s)")
    print(
        "all runs (s): fresh",
        [round(x, 2) for x in fresh],
        "resume",
        [round(x, 2) for x in resumed],
    )


if __name__ == "__main__":
    main()
