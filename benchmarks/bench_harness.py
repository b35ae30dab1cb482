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
               the first costs);
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
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchheal.harness import containers, images
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker import DockerHarness
from patchheal.harness.local import LocalHarness
from patchheal.harness.session import run_argv

ROOT = Path(__file__).resolve().parents[1]
STEP = "python -m pytest -q -p no:cacheprovider"
SLOW_TEST = "import time\n\n\ndef test_takes_two_seconds():\n    time.sleep(2.0)\n"


def project(tmp: Path) -> Path:
    tree = tmp / "project"
    shutil.copytree(ROOT / "patchheal" / "examples" / "demo" / "project", tree,
                    ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))  # fmt: skip
    (tree / "tests" / "test_slow.py").write_text(SLOW_TEST)
    return tree


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def phases(h: DockerHarness, tree: Path) -> dict[str, float]:
    """One warm no-op run split into the engine calls it makes (the session is warm)."""
    box = h._box(tree.resolve())
    container = box.session._container
    assert container is not None
    api = h.client.api
    out: dict[str, float] = {}
    t = time.perf_counter()
    h._box(tree.resolve())
    out["session lookup (image, settings, worktree identity)"] = time.perf_counter() - t
    t = time.perf_counter()
    exec_id = api.exec_create(container.id, run_argv("true", []), user=box.session.user)
    out["exec create"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in api.exec_start(exec_id["Id"], stream=True):
        pass
    out["exec start: scrub, run `true`, stream end"] = time.perf_counter() - t
    t = time.perf_counter()
    api.exec_inspect(exec_id["Id"])
    out["exec inspect (exit code)"] = time.perf_counter() - t
    t = time.perf_counter()
    box.session._sweep()
    out["sweep exec (end of run: kill, check, empty /tmp, /dev/shm)"] = time.perf_counter() - t
    return out


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
    client = containers.engine()
    defn = load_harness("python")
    one_time: dict[str, float] = {}
    if not args.skip_image_build:
        tag = ""

        def scratch() -> None:
            nonlocal tag
            tag = images.ensure_image(client, defn, from_scratch=True)

        one_time["base image from nothing (mmdebstrap+import+check)"] = timed(scratch)
        images.remove_image(client, tag)
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
        noop: list[float] = []
        for rep in range(max(3, args.reps // 2)):
            h = DockerHarness(defn, job_id=f"{job}-{rep}", setup=unique)
            h.prepare(tree)  # the dependency image exists: a lookup
            cold.append(timed_step("docker cold", lambda h=h: harness_run(h)))  # type: ignore[misc]
            if rep == 0:
                for _ in range(args.reps):
                    warm.append(timed_step("docker warm", lambda h=h: harness_run(h)))  # type: ignore[misc]
                    noop.append(timed(lambda h=h: h.run("true", tree, timeout=60, idle_timeout=60)))
                breakdown = phases(h, tree)
            h.close()
        images.remove_image(client, deps_image)  # a benchmark-only fingerprint: do not keep it

    base = median(bare)
    print(f"\nstep: `{STEP}` on the demo project + one 2 s test, {args.reps} reps, medians\n")
    print(f"{'variant':<34}{'median s':>10}{'vs bare':>10}{'overhead s':>12}")
    for label, samples in (("bare command on the host", bare), ("local harness", loc),
                           ("docker cold (first attempt)", cold), ("docker warm", warm),
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


if __name__ == "__main__":
    sys.exit(main())
