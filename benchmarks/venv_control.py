"""The control of bench_reproduce: what a fresh venv with the case's pins reproduces.

For a corpus case, on the host, without Docker and without patchheal's collectors: a
venv of the case's Python (pyenv's interpreter of that minor), the case's setup
installed offline from patchheal's host wheelhouse of that Python (`pip install
--no-index --find-links`; the harness runs downloaded what each case needs there), the
pre-fix tree materialized as bench_reproduce does (bench_context's `materialize`, the
dependency files aside unless the case installs the project or reads its files), then
the case's tests run plainly with the venv's python, by the command bench_reproduce
writes (pytest's: every file the fix adds tests to, as the harness's step runs them,
judged by the fix's test ids in a JUnit report; unittest's: the fix's tests): they must
fail before the fix and pass with the upstream fix's files laid over. That pair is "the venv
reproduces": the goal of the harness is every case the venv reproduces.

A case whose setup pins no pytest gets the image's pytest (6.0.2 on 3.9, 7.2.1 on 3.11,
8.3.5 on 3.13) when the wheelhouse has it, else the wheelhouse's nearest newer one that installs
offline, else its nearest older one (measured 2026-11-26: 6.2.5 on 3.9); a wheelhouse
with no pytest at all first gets the image's version
downloaded from PyPI by patchheal's downloader. The version installed is recorded. The
tests run under a 2 GiB address-space limit (the harness's sandbox has 2g of memory) and a
300 s timeout. Venvs are kept per (Python, setup)
under `VENV_ROOT`; a setup's `pip install -e .` runs per case in the case's tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import _config_aside, materialize, mirror
from bench_realfix import _apply_fix
from bench_realfix import _command as _pytest_command
from ci_checkout import tag_ci_version
from clean_suites import _git
from runner_commands import unittest_command

from patchheal.errors import DependencySetupError
from patchheal.harness.setup.wheelhouse import _download

PYENV = {"3.9": "3.9.18", "3.11": "3.11.7", "3.13": "3.13.0"}
IMAGE_PYTEST = {"3.9": "6.0.2", "3.11": "7.2.1", "3.13": "8.3.5"}
VENV_ROOT = Path(os.environ.get("BENCH_VENV_ROOT", "/tmp/phwt-venv/venvs"))
TIMEOUT = 300
MEMORY = 2 * 1024**3
_PYTEST_PIN = re.compile(r"^pytest(?:[=<>!~]|$)")


def wheelhouse(python: str) -> Path:
    root = Path(os.environ.get("PATCHHEAL_CACHE_DIR", Path.home() / ".cache" / "patchheal"))
    return root / "wheelhouse" / f"cp{python.replace('.', '')}"


def _pip_args(line: str) -> list[str] | None:
    """`pip install A B` -> [A, B]; None for a command that is not a pip install."""
    argv = shlex.split(line)
    if argv[:2] == ["pip", "install"]:
        return argv[2:]
    if argv[:4] == ["python", "-m", "pip", "install"]:
        return argv[4:]
    return None


def _editable(args: list[str]) -> bool:
    return "-e" in args or "--editable" in args


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _pip(venv: Path, python: str, args: list[str], cwd: Path | None = None) -> None:
    """pip install offline; an sdist whose isolated build cannot get its backend offline
    (MarkupSafe 2.0.1 on 3.11: no setuptools wheel in that wheelhouse) is built again
    with the venv's own setuptools and wheel (`--no-build-isolation`), as the harness's
    venv builds with the image's. Only the wheelhouse: the host's pip configuration
    (PIP_FIND_LINKS) is left out."""
    offline = ["--no-index", "--find-links", str(wheelhouse(python)), "--quiet"]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", *offline]
    done = subprocess.run([*pip, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0 and "build dependencies" in done.stdout + done.stderr:
        # `wheel` is a pure wheel, in the 3.9 wheelhouse only: any Python's will do.
        houses = [f"--find-links={h}" for h in sorted(wheelhouse(python).parent.iterdir())]
        tools = [*pip, *houses, "setuptools", "wheel"]
        subprocess.run(tools, capture_output=True, timeout=TIMEOUT, env=_pip_env())
        done = subprocess.run(
            [*pip, "--no-build-isolation", *args],
            cwd=cwd,
            env=_pip_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)}: {done.stderr.strip()[-300:]}")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _fetch_image_pytest(python: str) -> None:
    """The image's pytest (PyPI's release of Debian's version) into the wheelhouse, by
    patchheal's own downloader, when the wheelhouse has no pytest at all: a wheelhouse
    filled only by cases that pin none (the image has Debian's) would leave the venv
    without pytest. Best effort: a failed download leaves the wheelhouse as it was."""
    house = wheelhouse(python)
    if any(house.glob("pytest-*")):
        return
    house.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="venv-control-") as tmp:
        try:
            wanted = [[f"pytest=={IMAGE_PYTEST[python]}"]]
            _download(house, python, wanted, Path(tmp), lambda line: print(line, file=sys.stderr))
        except DependencySetupError as exc:
            print(f"image's pytest not downloaded for {python}: {exc}", file=sys.stderr)


def _pytests(python: str) -> list[str]:
    """The image's pytest if the wheelhouse has it, else the wheelhouse's ones, the
    nearest newer first, then the nearest older; a wheelhouse with none gets the image's
    version downloaded."""
    _fetch_image_pytest(python)
    image = _version(IMAGE_PYTEST[python])
    found = sorted({_version(w.name.split("-")[1]) for w in wheelhouse(python).glob("pytest-*")})
    ordered = [v for v in found if v >= image] + [v for v in reversed(found) if v < image]
    return [".".join(map(str, v)) for v in ordered]


def ensure_venv(case: dict[str, object]) -> Path:
    """The venv of the case's (Python, setup), its editable installs aside, made once; one
    per project too when the case installs the project: an editable install points into a
    case's tree, gone after the case, and another project's case on the same venv lost
    what it replaced (pluggy's, under pytest: execnet's control had no pluggy)."""
    python, setup = str(case["python"]), [str(s) for s in case["setup"]]  # type: ignore[attr-defined]
    keyed: list[object] = [python, setup, case["runner"]]
    keyed += [case["repo"]] if case.get("install_project") else []
    key = hashlib.sha256(json.dumps(keyed).encode()).hexdigest()[:16]
    venv = VENV_ROOT / f"py{python}-{key}"
    if (venv / ".ready").is_file():
        return venv
    VENV_ROOT.mkdir(parents=True, exist_ok=True)
    interpreter = f"/root/.pyenv/versions/{PYENV[python]}/bin/python3"
    subprocess.run([interpreter, "-m", "venv", "--clear", str(venv)], check=True)
    installs = [args for line in setup if (args := _pip_args(line)) is not None]
    pinned = any(_PYTEST_PIN.match(a) for args in installs for a in args)
    if case["runner"] == "pytest" and not pinned:
        for version in _pytests(python):
            try:
                _pip(venv, python, [f"pytest=={version}"])
                break
            except RuntimeError:
                continue  # its dependencies are not in the wheelhouse: the next nearest
    for args in installs:
        if not _editable(args):
            _pip(venv, python, args)
    (venv / ".ready").write_text(json.dumps({"python": python, "setup": setup}))
    return venv


def _installed(venv: Path, name: str) -> str:
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({name!r}))",
        ],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _dotted(test: str) -> str:
    """`pkg/tests/test_x.py::TestX::test_y` -> `pkg.tests.test_x.TestX.test_y`."""
    file, _, rest = test.partition("::")
    return ".".join([file[: -len(".py")].replace("/", "."), *filter(None, rest.split("::"))])


def _limit_memory() -> None:
    # A pre-fix test that loops allocating hits MemoryError, not the host's OOM killer.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _run(venv: Path, tree: Path, command: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env |= {"PATH": f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", "VIRTUAL_ENV": str(venv)}
    try:
        done = subprocess.run(
            ["sh", "-c", command],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        return -1, "timeout"
    return done.returncode, (done.stdout + done.stderr)[-600:]


def _failed(runner: str, code: int) -> bool:
    """pytest: 1 tests failed, 2 collection errors; 4 (no such test) and 5 (none run) are
    no failure of the test. unittest: any non-zero code."""
    return code in (1, 2) if runner == "pytest" else code != 0


def _junit_failed(report: Path, tests: list[str]) -> bool:
    """Whether any test of the JUnit report that is one of `tests` (parameters aside)
    failed or errored; none of them run counts as failed."""
    wanted = {tuple(t.split("::")[1:]) for t in tests}
    seen, failed = False, False
    for case in ET.parse(report).iter("testcase"):
        klass = str(case.get("classname", "")).split(".")[-1]
        name = str(case.get("name", "")).partition("[")[0]
        if (klass, name) in wanted or (name,) in wanted:
            seen = True
            failed |= any(case.find(tag) is not None for tag in ("failure", "error"))
    return failed or not seen


def control(case: dict[str, object]) -> dict[str, object]:
    """Fails before the fix, passes after it, in a fresh venv with the case's pins."""
    git_dir = mirror(str(case["repo"]))
    assert git_dir is not None
    runner = str(case["runner"])
    tests = [str(t) for t in case.get("tests") or [case["test"]]]  # type: ignore[attr-defined]
    out: dict[str, object] = {"fix": str(case["fix"])[:12], "venv_reproduced": False}
    started = time.monotonic()
    try:
        venv = ensure_venv(case)
        out["pytest"] = _installed(venv, "pytest")
        with tempfile.TemporaryDirectory(prefix="bench-venv-") as tmp:
            tree = Path(tmp) / "repo"
            tree.mkdir()
            materialize(case, git_dir, tree)
            if case.get("install_project"):
                out["version"] = tag_ci_version(case, git_dir, tree)  # as the harness's
            for line in case["setup"]:  # type: ignore[attr-defined]
                args = _pip_args(str(line))
                if args is not None and _editable(args):
                    _pip(venv, str(case["python"]), args, cwd=tree)
            config: list[str] = []
            if not (case.get("install_project") or case.get("keep_files")):
                _aside, config = _config_aside(tree)
                _git(tree, "add", "-A")
                _git(tree, "commit", "-qm", "configuration aside")
            report = Path(tmp) / "junit.xml"
            if runner == "unittest":
                command = unittest_command(tree, config, [_dotted(t) for t in tests], str(tree))
            else:
                # Like for like: the harness's step runs every file the fix adds tests to,
                # so does the control, and both judge the fix's tests by id (a neighbour
                # of the fix's test in that file can change how it goes: filelock
                # `e266937a96be`, a timed-out thread using up a one-shot failure).
                files = sorted({t.partition("::")[0] for t in tests})
                command = _pytest_command(tree, config, files, str(tree))
                command += f" --junitxml={report}"
            before, before_log = _run(venv, tree, command)
            if report.is_file():  # none when pytest stops before running (a usage error)
                before = 1 if _junit_failed(report, tests) else 0 if before == 1 else before
            out["command"] = command
            _git(tree, "reset", "-q", "--hard")  # no clean: an editable install's egg-info stays
            _apply_fix(case, git_dir, tree)
            report.unlink(missing_ok=True)  # the after run's own report, or none
            after, after_log = _run(venv, tree, command)
            if report.is_file() and after in (0, 1):
                after = 1 if _junit_failed(report, tests) else 0
        out |= {"before": before, "after": after}
        out["venv_reproduced"] = _failed(runner, before) and after == 0
        if not out["venv_reproduced"]:
            out["why"] = (
                f"before rc {before}: {before_log[-250:]}"
                if not _failed(runner, before)
                else f"after rc {after}: {after_log[-250:]}"
            )
    except Exception as error:  # a setup failure is the case's result, with its why
        out["why"] = f"error: {type(error).__name__}: {str(error)[:300]}"
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def cached_control(case: dict[str, object], runs: Path | None) -> dict[str, object]:
    """`control`, kept in RUNS/venv/ (apart from the harness's records)."""
    path = runs / "venv" / f"{str(case['fix'])[:12]}.json" if runs else None
    if path is not None and path.is_file():
        return dict(json.loads(path.read_text()))
    record = control(case)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
    return record
