"""The local harness: the step runs as a host process in the worktree.

Fast and with no isolation; the Docker harness is the authoritative one. A
job's setup runs in a venv of the job's own (`local/venv.py`), never in the
environment patchheal runs in, and the job's steps run with it activated.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from patchheal import proc
from patchheal.harness.base import DETERMINISTIC_ENV, OutputSink
from patchheal.harness.engine import leftovers
from patchheal.harness.local.venv import ensure_job_venv, generated_files, venv_environment
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS, precompiled
from patchheal.harness.setup import generated
from patchheal.models import CommandResult

# Inherited so that host tools are found; everything else is dropped.
INHERITED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    # The operator's choice to keep the host Python's pytest plugins out of the
    # project's runs (docs/harnesses.md); it adds nothing a step could not do itself.
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
)


class LocalHarness:
    """Runs commands with `/bin/sh -c` in the worktree, process-group killed on timeout."""

    name = "local"
    # A host process has no harness definition, so no regression steps of its own.
    regression: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        setup: Sequence[str] = (),
        env_passthrough: Sequence[str] = (),
        setup_timeout: float = 1800.0,
    ) -> None:
        self._setup = tuple(setup)
        self._passthrough = tuple(env_passthrough)
        self._setup_timeout = setup_timeout
        self._venvs: dict[Path, Path] = {}
        self._generated: dict[Path, list[generated.Generated]] = {}

    def environment(self, worktree: Path | None = None) -> dict[str, str]:
        env = {k: os.environ[k] for k in (*INHERITED, *self._passthrough) if k in os.environ}
        env.update(DETERMINISTIC_ENV)
        venv = self._venvs.get(worktree.resolve()) if worktree is not None else None
        return venv_environment(venv, env) if venv is not None else env

    def prepare(self, worktree: Path) -> None:
        if not self._setup:
            return
        from patchheal.workspace.worktrees import worktree_root

        # A worktree is reset between attempts, so setup runs once per worktree,
        # setup commands and dependency files (the venv's key), not once per attempt.
        venv = ensure_job_venv(
            worktree_root() / "venvs",
            worktree,
            self._setup,
            base_env=self.environment(),
            timeout=self._setup_timeout,
        )
        self._venvs[worktree.resolve()] = venv
        # What setup wrote in the tree is laid again before every run: a reset between
        # attempts cleans it away, and CI, which installs in the tree it tests, has it.
        self._generated[worktree.resolve()] = generated_files(venv)

    def run(
        self,
        command: str,
        worktree: Path,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: OutputSink | None = None,
        results: str | None = None,
        trace: bool = False,
    ) -> CommandResult:
        generated.lay_over(worktree, self._generated.get(worktree.resolve(), []))
        channel = ResultsChannel(trace=trace)
        # A temporary folder of the run's own, gone after it: what the step keeps there
        # (`tempfile`, pytest's `tmp_path`) is not there for the next run to find, as the
        # Docker harness empties `/tmp` before each. A file written anywhere else outside
        # the worktree is the tripwire's (docs/verdict.md, "Counting runs").
        # Made with an owner record beside it, so that a run whose patchheal was killed
        # leaves nothing the next run's cleanup (or `patchheal gc`) does not remove.
        scratch = leftovers.make_temp_dir("patchheal-run-")
        (scratch / "tmp").mkdir()
        try:
            env = channel.environment(
                {
                    **self.environment(worktree),
                    **self._bytecode_env(worktree),
                    "TMPDIR": str(scratch / "tmp"),
                },
                results_dir=str(channel.host_dir),
                collectors=str(precompiled(COLLECTORS)),
            )
            result = proc.run(
                command,
                cwd=worktree,
                env=env,
                timeout=timeout,
                idle_timeout=idle_timeout,
                on_output=on_output,
                harness=self.name,
            )
            return result.model_copy(update={"tests": channel.collect(worktree, results)})
        finally:
            channel.close()
            leftovers.remove_temp_dir(scratch)

    def _bytecode_env(self, worktree: Path) -> dict[str, str]:
        """No bytecode of the tree is ever read: a .pyc a candidate put in __pycache__
        (unchecked-hash: never compared with its .py) would run instead of the source
        the gates judged. So the tree's bytecode (`__pycache__/`, and sourceless `.pyc`/
        `.pyo` files, which import when no `.py` stands beside them) is removed before
        every run and none is written during it. The standard library's and the venv's
        bytecode is read where it is, as a plain run reads it: a per-run cache folder
        made every run (and every test of patchheal's suite, with its own HOME) compile
        pytest again, past a 2 s idle timeout. (The local harness isolates nothing: a
        step could write anywhere the user can; the Docker harness reads bytecode only
        from a prefix outside the tree.)"""
        for top, dirs, files in os.walk(worktree):
            if Path(top) == worktree and ".git" in dirs:
                dirs.remove(".git")
            if "node_modules" in dirs:
                dirs.remove("node_modules")
            if "__pycache__" in dirs:
                dirs.remove("__pycache__")
                cache = Path(top) / "__pycache__"
                if cache.is_symlink():  # never followed out of the tree
                    cache.unlink()
                else:
                    shutil.rmtree(cache, ignore_errors=True)
            for name in files:
                if name.endswith((".pyc", ".pyo")):
                    (Path(top) / name).unlink(missing_ok=True)
        return {"PYTHONDONTWRITEBYTECODE": "1"}

    def close(self) -> None:
        return None
