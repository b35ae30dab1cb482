"""Harness overhead: bare command vs local harness vs Docker harness (cold and warm).

The step is the bundled demo project's pytest run plus one test that takes
~2 s (a `time.sleep`, so the 2 cores of the machine do not turn CPU contention
into noise). Measured in the same run, medians of N repetitions:

- bare:        `python -m pytest -q` as a plain subprocess on the host;
- local:       the same through LocalHarness (deterministic env, capture);
- docker cold: the first attempt of a fresh DockerHarness (engine connection,
               image and dependency-image lookup, container create/start/remove),
               with the images already built;
- docker warm: later attempts of the same harness (what every attempt after
               the first costs);
- docker `true`: a warm attempt of a no-op command: the pure per-attempt cost.

One-time costs are reported on their own: the base image build from nothing
(mmdebstrap + import + health check, under a throwaway tag) and the dependency
image (host `pip download` + setup container + commit), once per fingerprint.
A phase breakdown of one warm attempt shows where the time goes.

Run: python benchmarks/bench_harness.py [--reps N] [--skip-image-build]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchheal.harness import containers, images, sandbox
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker import DockerHarness
from patchheal.harness.local import LocalHarness

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
    """One warm attempt split into the engine calls it makes."""
    image = h.run_image(tree)
    user = sandbox.resolve_user(h.defn, tree)
    out: dict[str, float] = {}
    started = time.perf_counter()
    kwargs = sandbox.step_container_kwargs(
        h.defn, image=image, command="true", worktree=tree, user=user,
        env=sandbox.environment(h.defn, ()), labels=containers.owner_labels("bench", "phase"),
        host_mounts=images.host_mounts(h.client, image),
    )  # fmt: skip
    out["fingerprint + image lookups"] = time.perf_counter() - started
    name = containers.container_name("bench", "phase")
    t = time.perf_counter()
    containers.remove_stale(h.client, name)
    out["stale-name check"] = time.perf_counter() - t
    t = time.perf_counter()
    container = h.client.containers.create(name=name, detach=True, **kwargs)
    out["create"] = time.perf_counter() - t
    t = time.perf_counter()
    stream = container.attach(stdout=True, stderr=True, stream=True, logs=True)
    container.start()
    out["attach + start"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in stream:
        pass
    container.wait()
    out["run `true` + wait"] = time.perf_counter() - t
    t = time.perf_counter()
    container.reload()
    out["inspect (exit, OOM)"] = time.perf_counter() - t
    t = time.perf_counter()
    containers.teardown(container)
    out["teardown (remove)"] = time.perf_counter() - t
    return out


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
        bare = [timed(lambda: subprocess.run(STEP.split(), cwd=tree, env=host_env,
                                             capture_output=True, check=False))
                for _ in range(args.reps)]  # fmt: skip
        local = LocalHarness()
        loc = [timed(lambda: local.run(STEP, tree, timeout=120, idle_timeout=60))
               for _ in range(args.reps)]  # fmt: skip
        cold: list[float] = []
        warm: list[float] = []
        noop: list[float] = []
        for rep in range(max(3, args.reps // 2)):
            h = DockerHarness(defn, job_id=f"{job}-{rep}", setup=unique)
            cold.append(timed(lambda h=h: (h.prepare(tree), h.run(  # type: ignore[misc]
                STEP, tree, timeout=120, idle_timeout=60))))  # fmt: skip
            if rep == 0:
                for _ in range(args.reps):
                    warm.append(timed(lambda h=h: h.run(STEP, tree, timeout=120, idle_timeout=60)))
                    noop.append(timed(lambda h=h: h.run("true", tree, timeout=60, idle_timeout=60)))
                result = h.run(STEP, tree, timeout=120, idle_timeout=60)
                assert "5 passed" in result.output or "passed" in result.output, result.output
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
    print("\nwhere a warm no-op attempt's time goes (one sample)")
    for label, seconds in breakdown.items():
        print(f"  {label:<58}{seconds * 1000:>8.1f} ms")
    warm_over = median(warm) - base
    verdict = "met" if warm_over < 1.0 and median(warm) / base < 1.5 else "NOT met"
    print(f"\ntarget (warm overhead < 1 s and < 1.5x bare): {verdict} "
          f"({warm_over:.2f} s, {median(warm) / base:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
