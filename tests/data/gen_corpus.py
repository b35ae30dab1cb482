"""Regenerate the failure corpus: `python tests/data/gen_corpus.py [--out DIR] [--only BUG]`.

Every log is recorded by really running a small failing program, RUNS times per
bug, each run in a fresh temporary project directory with another working
directory, PYTHONHASHSEED, time zone and start time; the last run of each bug
also gets CI-runner style timestamps on every line. The manifest names each
bug's expected class. Network: loopback only (the HTTP, TLS and refused-port
bugs talk to servers this script starts on 127.0.0.1); DNS failures are raised
inside the program, no query leaves the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_bugs import BUGS, Bug

HERE = Path(__file__).resolve().parent
RUNS = 3
TIMEZONES = ("UTC", "America/New_York", "Asia/Tokyo")


def _env(run: int, rng: random.Random) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PATCHHEAL", "CI"))}
    env.update(PYTHONHASHSEED=str(rng.randrange(1, 2**31)), TZ=TIMEZONES[run % len(TIMEZONES)],
               PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1", COLUMNS="80")  # fmt: skip
    env.pop("PYTHONPATH", None)
    return env


def _record(bug: Bug, run: int, out_dir: Path, rng: random.Random) -> dict[str, object]:
    base = Path(tempfile.mkdtemp(prefix=f"c{rng.randrange(10**6)}-"))
    project = base / rng.choice(("proj", "checkout", "src-tree")) / "repo"
    try:
        project.mkdir(parents=True)
        for rel, text in bug.files.items():
            path = project / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if bug.setup is not None:
            bug.setup(project)
        cwd = project if bug.fixed_cwd or run == 0 else (base if run == 1 else project / "sub")
        cwd.mkdir(exist_ok=True)
        argv = [a.replace("{project}", str(project)).replace("{python}", sys.executable)
                for a in bug.argv]  # fmt: skip
        started = dt.datetime.now(dt.UTC)
        with bug.context(project) as extra_env:
            env = _env(run, rng) | extra_env | {"CORPUS_RUN": str(run)}
            try:
                proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                      timeout=bug.timeout, errors="replace")  # fmt: skip
                output, exit_code, timed_out = proc.stdout + proc.stderr, proc.returncode, None
            except subprocess.TimeoutExpired as exc:
                out = exc.stdout or ""
                output = out.decode() if isinstance(out, bytes) else out
                exit_code, timed_out = None, "wall"
        header = (f"{started.isoformat()} runner-{rng.randrange(1000)} starting job "
                  f"{rng.getrandbits(64):x} in {project}\n")  # fmt: skip
        log = header + output
        if run == RUNS - 1:  # a CI runner's per-line timestamps
            stamp = started.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z "
            log = "".join(stamp + line for line in log.splitlines(keepends=True))
        bug_dir = out_dir / bug.id
        bug_dir.mkdir(parents=True, exist_ok=True)
        (bug_dir / f"run{run}.log").write_text(log)
        entry: dict[str, object] = {"log": f"{bug.id}/run{run}.log", "exit_code": exit_code,
                                    "timed_out": timed_out}  # fmt: skip
        junit = project / "junit.xml"
        if junit.exists():
            shutil.copy(junit, bug_dir / f"run{run}.junit.xml")
            entry["junit"] = f"{bug.id}/run{run}.junit.xml"
        if bug.expect_failure and exit_code == 0:
            raise SystemExit(f"{bug.id} run {run} passed; it must fail:\n{log}")
        entry["passed"] = exit_code == 0
        return entry
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE / "corpus")
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    rng = random.Random()  # runs must differ: that is the point
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for bug in BUGS:
        if args.only and bug.id not in args.only:
            continue
        runs = [_record(bug, n, args.out, rng) for n in range(bug.runs or RUNS)]
        manifest[bug.id] = {"expected_class": bug.expected_class, "kind": bug.kind,
                            "description": bug.description, "runs": runs}  # fmt: skip
        print(f"{bug.id:28} {bug.expected_class:17} exit codes {[r['exit_code'] for r in runs]}")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
