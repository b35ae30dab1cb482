"""Fidelity: a project's clean suite in a plain venv on this machine vs in the harness.

For each project of benchmarks/fidelity_projects.toml (a public repository at a pinned
commit, its Python, its install and test commands as its CI has them), the full suite
runs twice with the same install and the same command:

- **plain venv** (the baseline): a fresh clone of the project at the commit (its tags
  with it, as a CI checkout with history has them), a fresh venv of pyenv's interpreter
  of the project's Python minor, the install run in it from PyPI (this machine's
  internet access; the host's pip configuration other than its certificate left out),
  then the command; no patchheal anywhere;
- **harness**: `patchheal harness run python --repo <clone> --ref <commit> --setup
  <install> --keep -- <command>` (with `--python X` whenever `harness run` has the
  option, so it infers nothing; without it only 3.11 projects run, main's default), the
  project's results file read back from the kept worktree.

The command writes its outcomes by test id into the tree: pytest's `--junitxml`, or, for
unittest, a small runner given inline (`python -c`, fidelity.UNITTEST_RUNNER) around
unittest's own discovery. Printed: per project the tests, each side's outcomes and how
many ids have the same outcome on both, then every differing id with its reason (the
harness's message for it, else the plain run's; a run without results gives its first
error line).

Run: python benchmarks/bench_fidelity.py [--only NAME ...] [--runs DIR] [--rerun]
     [--side plain|harness|both] [--jobs 1] [--all-ids]
(`--runs DIR` keeps each side's outcome as DIR/NAME/{plain,harness}.json and reuses it:
a second call re-prints without running anything; `--rerun` runs again. The clones are
kept under --clones, default /work/fidelity; a project missing there is cloned from the
fetch tool's mirror, /work/.mirror/OWNER+NAME/repo.) Each side runs under `nice -n 10`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity import (
    PROJECTS,
    SETUP,
    Project,
    ProjectError,
    Side,
    first_error_line,
    harness_note,
    load_projects,
    parse_results,
    runtime_of,
    table,
)

PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
MIRRORS = Path("/work/.mirror")
INSTALL_TIMEOUT = 1200
TEST_TIMEOUT = 1800
# `python -m patchheal` puts its working directory first on sys.path: run from a
# checkout of patchheal, that checkout would win over PYTHONPATH (the code measured).
NEUTRAL = "/"
_KEPT = re.compile(r"^worktree kept: (.+)$", re.MULTILINE)


def interpreter(python: str) -> Path:
    """pyenv's newest interpreter of that minor (3.11 -> versions/3.11.7/bin/python)."""
    found = sorted(
        PYENV_ROOT.glob(f"{python}.*/bin/python"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.parent.name)],
    )
    if not found:
        raise ProjectError(f"no interpreter of Python {python} under {PYENV_ROOT}")
    return found[-1]


def clone(project: Project, clones: Path) -> Path:
    """The local clone of the project (from the fetch tool's mirror when missing), with
    the commit present."""
    path = clones / project.name
    if not path.exists():
        owner_name = project.source.removeprefix("github:").replace("/", "+")
        mirror = MIRRORS / owner_name / "repo"
        if not mirror.exists():
            raise ProjectError(f"{project.name}: no clone at {path} and no mirror at {mirror}")
        subprocess.run(["git", "clone", "--quiet", str(mirror), str(path)], check=True)
    has = subprocess.run(
        ["git", "-C", str(path), "cat-file", "-e", f"{project.commit}^{{commit}}"],
        capture_output=True,
    )
    if has.returncode != 0:
        raise ProjectError(f"{project.name}: commit {project.commit} is not in {path}")
    return path


def _plain_env(venv: Path) -> dict[str, str]:
    """The host's environment without patchheal's or our PYTHONPATH and without the
    host's pip redirections (its certificate kept: PyPI goes through it)."""
    dropped = ("PYTHON", "PATCHHEAL_", "PIP_", "VIRTUAL_ENV", "PYTEST_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    for kept in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
        if kept in os.environ:
            env[kept] = os.environ[kept]
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _shell(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            ["nice", "-n", "10", "bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode()
        return None, out + f"\nTimeoutError: killed after {timeout:.0f} s"
    return done.returncode, done.stdout


def _read_results(project: Project, tree: Path, log: Path) -> dict[str, tuple[str, str]] | None:
    """The run's outcomes; its raw results file is kept beside its log (`.results`), so a
    re-print parses it again with whatever the parser has learnt since."""
    path = tree / project.results_file
    try:
        text = path.read_text(errors="replace")
    except OSError:  # absent or unreadable
        return None
    log.with_suffix(".results").write_text(text)
    return _parse(project, text)


def _parse(project: Project, text: str) -> dict[str, tuple[str, str]] | None:
    try:
        return parse_results(project.runner, text)
    except ValueError:  # half-written by a killed run
        return None


def run_plain(project: Project, source: Path, log: Path) -> Side:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"fidelity-{project.name}-") as tmp:
        tree, venv = Path(tmp) / "tree", Path(tmp) / "venv"
        subprocess.run(["git", "clone", "--quiet", str(source), str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", project.commit], check=True)
        python = interpreter(project.python)
        subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
        env = _plain_env(venv)
        log.write_text("")
        for step in project.install:
            code, out = _shell(step, tree, env, INSTALL_TIMEOUT)
            with log.open("a") as handle:
                handle.write(f"$ {step}\n{out}")
            if code != 0:
                note = SETUP + first_error_line(out)
                return Side(None, code, time.monotonic() - started, note)
        command = project.full_command()
        code, out = _shell(command, tree, env, TEST_TIMEOUT)
        with log.open("a") as handle:
            handle.write(f"$ {project.command}\n{out}")
        outcomes = _read_results(project, tree, log)
        note = first_error_line(out, fallback=outcomes is None)
        version = subprocess.run(
            [str(venv / "bin" / "python"), "--version"], capture_output=True, text=True
        ).stdout.strip()
        return Side(outcomes, code, time.monotonic() - started, note, {"python": version})


def harness_has_python_option() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "harness", "run", "--help"],
        cwd=NEUTRAL,
        capture_output=True,
        text=True,
    )
    return "--python" in done.stdout


def _kept_tree(workspace: Path, project: Project) -> Path:
    """The run's worktree in the kept workspace: `wt/run` today; if the layout changes,
    the folder (at most two levels down) that holds the results file."""
    tree = workspace / "wt" / "run"
    if (tree / project.results_file).exists():
        return tree
    for pattern in (f"*/{project.results_file}", f"*/*/{project.results_file}"):
        for found in workspace.glob(pattern):
            return found.parent
    return tree


def run_harness(project: Project, source: Path, log: Path, with_python: bool) -> Side | None:
    """None when the project's Python cannot be asked for (`harness run` without
    `--python`): nothing is recorded, so a later call with the option runs it."""
    started = time.monotonic()
    argv = ["nice", "-n", "10", sys.executable, "-m", "patchheal", "harness", "run", "python"]
    argv += ["--repo", str(source), "--ref", project.commit]
    for step in project.install:
        argv += ["--setup", step]
    argv += ["--keep", "--timeout", str(TEST_TIMEOUT), "--idle-timeout", "600"]
    # Always named when it can be: a `harness run` that infers the Python (as `heal`
    # does) could pick another one than the plain side's.
    if with_python:
        argv += ["--python", project.python]
    elif project.python != "3.11":  # main's harness run: always its default, 3.11
        print(f"{project.name}: harness run has no --python", file=sys.stderr)
        return None
    argv += ["--", project.full_command()]
    with log.open("w") as handle:  # written as it runs: `tail -f` shows where it is
        handle.write(f"$ {' '.join(argv)}\n")
        handle.flush()
        done = subprocess.run(
            argv,
            cwd=NEUTRAL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=INSTALL_TIMEOUT + TEST_TIMEOUT + 600,
        )
    output = log.read_text(errors="replace")
    kept = _KEPT.search(output)
    outcomes = None
    if kept:
        workspace = Path(kept.group(1).strip())
        outcomes = _read_results(project, _kept_tree(workspace, project), log)
        # Files the step made may belong to another uid: what cannot go stays, said.
        shutil.rmtree(workspace, ignore_errors=True)
        if workspace.exists():
            print(f"{project.name}: could not remove all of {workspace}", file=sys.stderr)
    note = harness_note(output, fallback=outcomes is None)
    return Side(outcomes, done.returncode, time.monotonic() - started, note)


def _load(project: Project, record: Path) -> Side:
    """A kept side, its results and (harness) its reason read again from the raw files
    kept beside it: what the readers find may have improved since."""
    side = Side.from_json(json.loads(record.read_text()))
    raw, log = record.with_suffix(".results"), record.with_suffix(".log")
    if raw.exists():
        side.outcomes = _parse(project, raw.read_text(errors="replace"))
    if log.exists():
        side.extra["runtime"] = runtime_of(log.read_text(errors="replace"))
    if record.stem == "plain" and log.exists() and side.outcomes is not None:
        side.note = first_error_line(log.read_text(errors="replace"), fallback=False)
    if record.stem == "harness" and log.exists():
        side.note = harness_note(log.read_text(errors="replace"), fallback=side.outcomes is None)
    return side


def _side(project: Project, which: str, args: argparse.Namespace, with_python: bool) -> Side | None:
    record = args.runs / project.name / f"{which}.json"
    if record.exists() and not args.rerun:
        return _load(project, record)
    record.parent.mkdir(parents=True, exist_ok=True)
    source = clone(project, args.clones)
    log = record.with_suffix(".log")
    print(f"{project.name}: {which} ...", file=sys.stderr, flush=True)
    side = (
        run_plain(project, source, log)
        if which == "plain"
        else run_harness(project, source, log, with_python)
    )
    if side is None:
        return None
    side.extra.update(
        commit=project.commit, install=" && ".join(project.install), command=project.command
    )
    side.extra["runtime"] = runtime_of(log.read_text(errors="replace"))
    record.write_text(json.dumps(side.to_json(), indent=1))
    print(f"{project.name}: {which} done in {side.seconds:.0f} s", file=sys.stderr, flush=True)
    return side


def _measure(
    project: Project, args: argparse.Namespace, with_python: bool
) -> tuple[Project, Side | None, Side | None]:
    sides: dict[str, Side | None] = {"plain": None, "harness": None}
    for which in sides:
        record = args.runs / project.name / f"{which}.json"
        if args.side in (which, "both"):
            sides[which] = _side(project, which, args, with_python)
        elif record.exists():
            sides[which] = _load(project, record)
    return project, sides["plain"], sides["harness"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=Path, default=PROJECTS)
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/fidelity-runs"))
    parser.add_argument("--clones", type=Path, default=Path("/work/fidelity"))
    parser.add_argument("--rerun", action="store_true", help="run again what --runs holds")
    parser.add_argument("--side", choices=("plain", "harness", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=1, help="projects at a time (CPU is scarce)")
    parser.add_argument("--all-ids", action="store_true", help="print every differing id")
    parser.add_argument("--cached-only", action="store_true", help="only re-print --runs")
    args = parser.parse_args()
    args.runs, args.clones = args.runs.resolve(), args.clones.resolve()
    try:
        projects = load_projects(args.projects)
        unknown = sorted(set(args.only) - {p.name for p in projects})
        if unknown:
            raise ProjectError(f"unknown project(s): {', '.join(unknown)}")
        if args.jobs < 1:
            raise ProjectError("--jobs must be at least 1")
        chosen = [p for p in projects if not args.only or p.name in args.only]
        if args.cached_only:
            rows = [_cached(p, args.runs) for p in chosen]
        else:
            with_python = harness_has_python_option()
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                rows = list(pool.map(lambda p: _measure(p, args, with_python), chosen))
    except ProjectError as exc:
        print(f"bench_fidelity: {exc}", file=sys.stderr)
        return 2
    print(table(rows, limit=0 if args.all_ids else 10))
    return 0


def _cached(project: Project, runs: Path) -> tuple[Project, Side | None, Side | None]:
    sides = []
    for which in ("plain", "harness"):
        record = runs / project.name / f"{which}.json"
        sides.append(_load(project, record) if record.exists() else None)
    return project, sides[0], sides[1]


if __name__ == "__main__":
    sys.exit(main())
