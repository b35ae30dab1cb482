"""Harness overhead: bare command vs local harness vs Docker harness (cold and warm).

The step is the bundled demo project's pytest run plus one test that takes
~2 s (a `time.sleep`, so the 2 cores of the machine do not turn CPU contention
into noise). Measured in the same run, medians of N repetitions:

- bare:        `python -m pytest -q` as a plain subprocess on the host;
- local:       the same through LocalHarness (deterministic env, capture);
- docker cold: the first run of a fresh DockerHarness (engine connection,
               image and dependency-image lookup, container create/start/remove),
               with the images already built;
- docker warm: later attempts of the same harness (what every attempt after
               the first costs): the run's exec (scrub, fresh results volume,
               step), the sweep exec that ends it, the results read back
               through the engine;
- docker warm + tracked check: a warm attempt as a verification run makes it,
               with the tracked-files fingerprint before and after
               (workspace/tracked.py, host git);
- docker exec, bare: the same step as one plain `docker exec` in the same warm
               container (no scrub, sweep, results channel or check): the
               target's baseline, interleaved with the two warm variants;
- docker `true`: a warm attempt of a no-op command: the pure per-attempt cost
               (the run's exec and the sweep exec that ends every run, issue 25).

One-time costs are reported on their own: the base image build from nothing
(mmdebstrap + import + health check, under a throwaway tag) and the dependency
image (host `pip download` + setup container + commit), once per fingerprint.
A phase breakdown of one warm attempt shows where the time goes.

Run: python benchmarks/bench_harness.py [--reps N] [--skip-image-build]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers, dockerapi, sandbox
from patchheal.harness.engine.session import run_argv
from patchheal.harness.images import build as images
from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import volume as resultsvolume
from patchheal.harness.results.untrusted import Budget
from patchheal.workspace import tracked

ROOT = Path(__file__).resolve().parents[1]
STEP = "python -m pytest -q -p no:cacheprovider"
SLOW_TEST = "import time\n\n\ndef test_takes_two_seconds():\n    time.sleep(2.0)\n"


def project(tmp: Path) -> Path:
    tree = tmp / "project"
    shutil.copytree(ROOT / "patchheal" / "examples" / "demo" / "project", tree,
                    ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))  # fmt: skip
    (tree / "tests" / "test_slow.py").write_text(SLOW_TEST)
    # A git worktree, so the tracked-files check does what it does in a verification run.
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bench"]):
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *argv], cwd=tree,
                       check=True, capture_output=True)  # fmt: skip
    return tree


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def phases(h: DockerHarness, tree: Path) -> dict[str, float]:
    """One warm no-op run split into the engine calls it makes (the session is warm)."""
    session = h._box(tree.resolve())
    container = session.container
    api = h.client.api
    out: dict[str, float] = {}
    t = time.perf_counter()
    h._box(tree.resolve())
    out["session lookup (image, settings, worktree identity)"] = time.perf_counter() - t
    t = time.perf_counter()
    argv = run_argv("true", [], resultsvolume.PRELUDE)
    env = {"PATCHHEAL_RESULTS_DIR": resultsvolume.run_dir("bench")}
    exec_id = api.exec_create(container.id, argv, user=session.user, environment=env)
    out["exec create"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in api.exec_start(exec_id["Id"], stream=True):
        pass
    out["exec start: scrub, fresh results volume, `true`, end"] = time.perf_counter() - t
    t = time.perf_counter()
    api.exec_inspect(exec_id["Id"])
    out["exec inspect (exit code)"] = time.perf_counter() - t
    t = time.perf_counter()
    session._sweep()
    out["sweep exec (end of run: kill, check, empty /tmp, /dev/shm)"] = time.perf_counter() - t
    t = time.perf_counter()
    resultsvolume.collect(container, "bench", 64 << 20, Budget())
    out["results read back (engine archive stream, tar)"] = time.perf_counter() - t
    t = time.perf_counter()
    tracked.touched(tracked.snapshot(tree), tree)
    out["tracked-files check (git diff before and after)"] = time.perf_counter() - t
    return out


def bare_exec(h: DockerHarness, tree: Path) -> tuple[str, int | None]:
    """STEP as one plain exec in the worktree's warm sandbox container, nothing around it."""
    session = h._box(tree.resolve())
    api = h.client.api
    exec_id = api.exec_create(
        session.container.id,
        ["/bin/sh", "-c", STEP],
        user=session.user,
        environment=sandbox.environment(h.defn, ()),
        workdir=h.defn.sandbox.workdir,
    )["Id"]
    output = api.exec_start(exec_id).decode(errors="replace")
    return output, api.exec_inspect(exec_id).get("ExitCode")


def checked_run(h: DockerHarness, tree: Path) -> tuple[str, int | None]:
    """A warm attempt as verification makes it: tracked files fingerprinted around the run."""
    before = tracked.snapshot(tree)
    result = h.run(STEP, tree, timeout=120, idle_timeout=60)
    if tracked.touched(before, tree):
        raise SystemExit("bench_harness: the step changed tracked files")
    return result.output, result.exit_code


EXPECTED = re.compile(r"\b1 failed, 5 passed\b")


def checked(label: str, output: str, code: int | None) -> None:
    """A variant that did not run the step as the baseline did measures nothing: stop."""
    if code != 1 or not EXPECTED.search(output):
        raise SystemExit(
            f"bench_harness: the {label} run did not run the step as expected "
            f"(exit {code}, want 1 with '1 failed, 5 passed'); no ratio is printed.\n"
            f"{output[-2000:]}"
        )


def timed_step(label: str, fn: Callable[[], tuple[str, int | None]]) -> float:
    started = time.perf_counter()
    output, code = fn()
    elapsed = time.perf_counter() - started
    checked(label, output, code)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--skip-image-build", action="store_true")
    args = parser.parse_args()
    client = dockerapi.engine()
    defn = load_harness("python")
    one_time: dict[str, float] = {}
    if not args.skip_image_build:
        tag = ""

        def scratch() -> None:
            nonlocal tag
            tag = images.ensure_image(client, defn, from_scratch=True)

        one_time["base image from nothing (mmdebstrap+import+check)"] = timed(scratch)
        containers.remove_image(client, tag)
    one_time["base image, cached (lookup)"] = timed(lambda: images.ensure_image(client, defn))

    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        tree = project(Path(tmp))
        os.environ["PATCHHEAL_CACHE_DIR"] = str(Path(tmp) / "cache")
        job = f"bench-{os.getpid()}"
        setup = ["pip install -e .[test]"]
        # A fresh cache dir and a unique setup string force a real dependency install.
        unique = [f"{setup[0]} && echo {job}"]
        h0 = DockerHarness(defn, job_id=job, setup=unique)
        one_time["dependency image (pip download + setup + commit)"] = timed(
            lambda: h0.prepare(tree)
        )
        deps_image = h0.run_image(tree)
        h0.close()

        host_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

        def bare_run() -> tuple[str, int | None]:
            done = subprocess.run(STEP.split(), cwd=tree, env=host_env, capture_output=True,
                                  text=True, check=False)  # fmt: skip
            return done.stdout + done.stderr, done.returncode

        def harness_run(h: LocalHarness | DockerHarness) -> tuple[str, int | None]:
            result = h.run(STEP, tree, timeout=120, idle_timeout=60)
            return result.output, result.exit_code

        bare = [timed_step("bare", bare_run) for _ in range(args.reps)]
        local = LocalHarness()
        loc = [timed_step("local", lambda: harness_run(local)) for _ in range(args.reps)]
        cold: list[float] = []
        warm: list[float] = []
        warm_checked: list[float] = []
        exec_bare: list[float] = []
        noop: list[float] = []
        for rep in range(max(3, args.reps // 2)):
            h = DockerHarness(defn, job_id=f"{job}-{rep}", setup=unique)
            h.prepare(tree)  # the dependency image exists: a lookup
            cold.append(timed_step("docker cold", lambda h=h: harness_run(h)))  # type: ignore[misc]
            if rep == 0:
                steps = (
                    (exec_bare, "docker exec, bare", partial(bare_exec, h, tree)),
                    (warm, "docker warm", partial(harness_run, h)),
                    (warm_checked, "docker warm + tracked check", partial(checked_run, h, tree)),
                )
                for _ in range(args.reps):  # interleaved: a load change hits all alike
                    for samples, label, step in steps:
                        samples.append(timed_step(label, step))
                    noop.append(timed(partial(h.run, "true", tree, timeout=60, idle_timeout=60)))
                breakdown = phases(h, tree)
            h.close()
        containers.remove_image(client, deps_image)  # a benchmark-only fingerprint: do not keep it

    base = median(bare)
    print(f"\nstep: `{STEP}` on the demo project + one 2 s test, {args.reps} reps, medians\n")
    print(f"{'variant':<34}{'median s':>10}{'vs bare':>10}{'overhead s':>12}  (bare: on the host)")
    for label, samples in (("bare command on the host", bare), ("local harness", loc),
                           ("docker cold (first attempt)", cold), ("docker exec, bare", exec_bare),
                           ("docker warm", warm), ("docker warm + tracked check", warm_checked),
                           ("docker warm, `true` (no-op)", noop)):  # fmt: skip
        m = median(samples)
        over = m - base if "no-op" not in label else m
        print(f"{label:<34}{m:>10.3f}{m / base:>9.2f}x{over:>12.3f}")
    print("\none-time costs")
    for label, seconds in one_time.items():
        print(f"  {label:<58}{seconds:>8.2f} s")
    print("\nwhere a warm no-op run's time goes (one sample)")
    for label, seconds in breakdown.items():
        print(f"  {label:<58}{seconds * 1000:>8.1f} ms")
    warm_over = median(warm) - base
    verdict = "met" if warm_over <= 0.3 and median(warm) / base <= 1.1 else "NOT met"
    print(f"\ntarget (warm overhead <= 0.3 s and <= 1.1x bare): {verdict} "
          f"({warm_over:.2f} s, {median(warm) / base:.2f}x)")  # fmt: skip
    in_box = median(exec_bare)
    ratio = median(warm_checked) / in_box
    print(f"target (warm attempt + tracked check <= 1.1x a bare docker exec of the step): "
          f"{'met' if ratio <= 1.1 else 'NOT met'} ({ratio:.3f}x, "
          f"+{median(warm_checked) - in_box:.3f} s; "
          f"warm alone {median(warm) / in_box:.3f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
