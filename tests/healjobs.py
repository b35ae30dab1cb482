"""Builders for small real jobs: a git repository with a bug, a spec, and candidate diffs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

BUGGY = textwrap.dedent("""\
    def add(a, b):
        return a - b


    def mul(a, b):
        return a * b
""")

TESTS = textwrap.dedent("""\
    from calc import add, mul


    def test_add():
        assert add(2, 3) == 5


    def test_mul():
        assert mul(2, 3) == 6
""")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_calc_repo(root: Path, *, files: dict[str, str] | None = None) -> Path:
    repo = root / "calc-repo"
    repo.mkdir(parents=True)
    contents = {
        "calc.py": BUGGY,
        "tests/test_calc.py": TESTS,
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    }
    contents.update(files or {})
    for rel, text in contents.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with a bug")
    return repo


def diff_for(repo: Path, edits: dict[str, str]) -> str:
    """The unified diff that turns the repo's files into `edits`, leaving the repo clean."""
    originals = {}
    for rel, text in edits.items():
        path = repo / rel
        originals[rel] = path.read_text() if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached") + "\n"
    git(repo, "reset", "-q", "--hard", "HEAD")
    return diff


FIX = BUGGY.replace("return a - b", "return a + b")
WRONG = BUGGY.replace("return a - b", "return b - a")
HANG = BUGGY.replace("return a - b", "import time\n    time.sleep(60)\n    return a + b")


def toml_str(value: str) -> str:
    return "'''" + value + "'''"


def write_spec(
    path: Path,
    repo: Path,
    *,
    job_id: str = "calc",
    diffs: list[str] = (),
    steps: list[tuple[str, str]] | None = None,
    regression: str | None = None,
    budget: str = "",
    extra: str = "",
    proposer: str | None = None,
) -> Path:
    steps = steps or [("unit", f"{sys.executable} -m pytest -q tests/test_calc.py::test_add")]
    lines = [
        "[job]",
        f'id = "{job_id}"',
        f'repo = "{repo}"',
        'base = "main"',
        'harness = "local"',
        "",
    ]
    for name, command in steps:
        lines += ["[[steps]]", f'name = "{name}"', f"command = {toml_str(command)}", ""]
    if regression:
        lines += ["[regression]", f"command = {toml_str(regression)}", ""]
    if proposer is not None:  # raw TOML: an agent, a chain, an llm
        lines += [proposer, ""]
    else:
        lines += [
            "[proposer]",
            'kind = "scripted"',
            "diffs = [" + ", ".join(toml_str(d) for d in diffs) + "]",
            "",
        ]
    if budget:
        lines += ["[budget]", budget, ""]
    lines.append(extra)
    path.write_text("\n".join(lines))
    return path


# -- multi-step jobs: one bug per step, and a fixer agent that sees the worktree --

STEP_BUG = "    return a - b  # bug\n"
# Not the same size as the bug: a same-size edit made within the second of a worktree
# reset can be invisible to git's stat check (see patching.temp_index), which is not
# what these tests are about.
STEP_FIX = "    return a + b  # fixed\n"


def step_module(index: int) -> str:
    return f"def total_{index}(a, b):\n{STEP_BUG}"


def step_check(index: int) -> str:
    """A step script: fast (no pytest start-up) and its own file, so its own fingerprint."""
    return textwrap.dedent(f"""\
        import sys

        sys.path.insert(0, ".")
        from bugs.b{index} import total_{index}


        def check_total_{index}():
            got = total_{index}(2, 3)
            assert got == 5, f"total_{index}(2, 3) returned {{got}}"


        check_total_{index}()
        print("step {index} ok")
    """)


def make_multi_repo(root: Path, steps: int, *, name: str = "multi-repo") -> Path:
    """A repository with `steps` bugs, bugs/bN.py, each checked by tests/check_bN.py."""
    repo = root / name
    repo.mkdir(parents=True)
    contents = {"bugs/__init__.py": "", "pyproject.toml": '[project]\nname = "multi"\n'}
    for index in range(1, steps + 1):
        contents[f"bugs/b{index}.py"] = step_module(index)
        contents[f"tests/check_b{index}.py"] = step_check(index)
    for rel, text in contents.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"{steps} bugs")
    return repo


def multi_steps(steps: int, *, python: str = sys.executable) -> list[tuple[str, str]]:
    return [(f"s{i}", f"{python} tests/check_b{i}.py") for i in range(1, steps + 1)]


def step_fix_diff(repo: Path, index: int) -> str:
    return diff_for(repo, {f"bugs/b{index}.py": step_module(index).replace(STEP_BUG, STEP_FIX)})


# The fixer agent: a real command the `agent` proposer runs in the attempt
# worktree. It fixes the first bug left in bugs/ (so on a step's starting
# point, that step's bug), logs each call, and can wait on a gate file so a
# test interleaves a second process deterministically.
FIXER = textwrap.dedent("""\
    import argparse, fcntl, json, os, pathlib, sys, time

    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--gate", default=None)
    parser.add_argument("--default", default="fix", choices=["fix", "wrong", "same"])
    parser.add_argument("--wrong-calls", default="", help="calls that propose a new wrong fix")
    parser.add_argument("--same-calls", default="", help="calls that propose the same wrong fix")
    parser.add_argument("--fix-calls", default="", help="calls that propose the right fix")
    args = parser.parse_args()

    log = pathlib.Path(args.log)
    targets = sorted(pathlib.Path("bugs").glob("b*.py"), key=lambda p: int(p.stem[1:]))
    target = next((p for p in targets if "a - b" in p.read_text()), None)
    # A marker in the worktree's own git dir: `reset` keeps it, recreating the worktree drops it.
    gitdir = pathlib.Path(pathlib.Path(".git").read_text().split("gitdir:")[1].strip())
    marker = gitdir / "fixer-was-here"
    entry = {
        "attempt": os.environ.get("PATCHHEAL_ATTEMPT"),
        "fresh_worktree": not marker.exists(),
        "target": target.name if target else None,
        "cwd": os.getcwd(),
        "time": time.time(),
    }
    marker.write_text("1")
    # Numbered under a lock: two agents starting at once must not both be call 1 (both
    # would then pass the same gate).
    with log.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        call = len(handle.read().splitlines()) + 1
        handle.write(json.dumps({"call": call, **entry}) + "\\n")
    print(f"fixer call {call} on {entry['target']}", flush=True)
    if args.gate:
        go = pathlib.Path(args.gate) / f"go-{call}"
        deadline = time.time() + 120
        while not go.exists() and time.time() < deadline:
            time.sleep(0.02)
    if target is None:
        sys.exit(0)
    action = args.default
    for name in ("wrong", "same", "fix"):
        if str(call) in getattr(args, name + "_calls").split(","):
            action = name
    text = target.read_text()
    if action == "fix":
        target.write_text(text.replace("a - b  # bug", "a + b  # fixed"))
        print("STRATEGY: fix_logic")
    elif action == "same":
        target.write_text(text.replace("a - b  # bug", "b - a  # swapped"))
        print("STRATEGY: swap_operands")
    else:
        target.write_text(text.replace("a - b", f"a - b + 0 * {call}"))
        print("STRATEGY: tweak")
""")


def write_fixer(root: Path) -> Path:
    path = root / "fixer.py"
    path.write_text(FIXER)
    return path


def fixer_proposer(
    fixer: Path,
    log: Path,
    *,
    gate: Path | None = None,
    default: str = "fix",
    wrong_calls: tuple[int, ...] = (),
    same_calls: tuple[int, ...] = (),
    fix_calls: tuple[int, ...] = (),
    python: str = sys.executable,
    extra: str = "",
) -> str:
    """The `[proposer]` TOML that runs the fixer agent (`extra`: more TOML lines)."""
    command = f"{python} {fixer} --log {log} --default {default}"
    if wrong_calls:
        command += f" --wrong-calls {','.join(map(str, wrong_calls))}"
    if same_calls:
        command += f" --same-calls {','.join(map(str, same_calls))}"
    if fix_calls:
        command += f" --fix-calls {','.join(map(str, fix_calls))}"
    if gate is not None:
        command += f" --gate {gate}"
    return "\n".join(["[proposer]", 'kind = "agent"', f"command = {toml_str(command)}", extra])


def fixer_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


# -- running heals: in process (fast) and as a real `python -m patchheal` process --


def heal_in_process(root: Path, spec_path: Path, **options: Any) -> Any:
    """HealLoop.run() on a spec file, with every state path under `root`."""
    from patchheal.config import load_spec
    from patchheal.intake.toml import spec_to_toml
    from patchheal.loop.controller import HealLoop, HealOptions

    spec = load_spec(spec_path)
    opts = HealOptions(
        state_dir=root / "var",
        db=str(root / "store.sqlite3"),
        reports_dir=root / "reports",
        **options,
    )
    return HealLoop(spec, spec_to_toml(spec), opts).run()


def state_args(root: Path) -> list[str]:
    return [
        "--db",
        str(root / "store.sqlite3"),
        "--reports",
        str(root / "reports"),
        "--state-dir",
        str(root / "var"),
    ]


def patchheal_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m patchheal ARGS` as a real process (the test's environment is inherited)."""
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_heal(spec: Path, root: Path, *extra: str) -> subprocess.Popen[str]:
    """Start `python -m patchheal heal SPEC` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "patchheal", "heal", str(spec), *state_args(root), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def workspace_of(job_id: str, db: Path) -> Path:
    """The workspace folder a run of `job_id` against the store `db` uses (or used)."""
    from patchheal.memory.db import resolve_db_url
    from patchheal.workspace.worktrees import workspace_name, worktree_root

    return worktree_root() / workspace_name(job_id, resolve_db_url(str(db)))


def events_of(root: Path, job_id: str) -> list[dict[str, Any]]:
    """The job's events.jsonl as dicts (a torn last line is skipped)."""
    from patchheal.telemetry.events import EventLog

    path = root / "var" / "runs" / job_id / "events.jsonl"
    if not path.exists():
        return []
    return [e.model_dump() for e in EventLog.read(path)]


def wait_for(predicate: Any, *, timeout: float = 60, what: str = "a condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
