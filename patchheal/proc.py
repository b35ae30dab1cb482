"""The one helper every subprocess goes through.

Argument lists by default (a shell only when the user's step command needs
one), a new session so the whole process group can be killed, wall-clock and
idle (no output) timeouts enforced from outside, output captured with a cap
that keeps the head and the tail (the failure is usually at the end).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from patchheal.errors import PatchhealError
from patchheal.models import CommandResult

DEFAULT_OUTPUT_CAP = 2 * 1024 * 1024
_HEAD_BYTES = 64 * 1024
_GIT_LEAKY_VARS = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY",
                   "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_SSH",
                   "GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR", "GIT_ASKPASS", "GIT_COMMON_DIR",
                   "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")  # fmt: skip
# Host-side git reads repositories and worktrees a candidate's step may have
# written to: nothing in them may make git run a program. These settings are
# passed on git's command-line level (GIT_CONFIG_COUNT), which outranks every
# config file, and system/global config is not read at all. Filter drivers
# (filter.<name>.clean/smudge/process) cannot be disabled wholesale; they take
# effect only when a config file defines one, and the only config file host
# git reads is the job's private repository's, which patchheal alone writes.
HOST_GIT_CONFIG = {
    "core.fsmonitor": "false",
    "core.hooksPath": "/dev/null",
    "core.sshCommand": "false",
    "core.pager": "cat",
    "core.editor": "false",
    "core.askPass": "",
    "core.untrackedCache": "false",
    "credential.helper": "",
    "diff.external": "",
    "protocol.allow": "never",
    "protocol.file.allow": "always",
    # No `hint:` lines or advice in anything git prints: its output reaches
    # error messages, reports and the terminal, where advice for a person
    # typing git commands (detached HEAD, default branch name) is noise.
    # GIT_ADVICE=0 (below) silences all of it on git >= 2.46; these keys
    # cover the advice older versions print.
    "advice.detachedHead": "false",
    "advice.defaultBranchName": "false",
    "advice.statusHints": "false",
    "advice.resolveConflict": "false",
    "advice.mergeConflict": "false",
    "advice.addIgnoredFile": "false",
    "advice.addEmptyPathspec": "false",
    "advice.ignoredHook": "false",
    "advice.skippedCherryPicks": "false",
    "advice.forceDeleteBranch": "false",
}


class CommandFailed(PatchhealError, RuntimeError):
    """A helper command (not a user's step) exited non-zero."""

    def __init__(self, argv: Sequence[str], result: CommandResult) -> None:
        self.argv = list(argv)
        self.result = result
        indented = "\n".join("    " + line for line in result.output.rstrip().splitlines()[-40:])
        super().__init__(
            f"command failed with exit code {result.exit_code}: {' '.join(self.argv)}\n{indented}"
        )


def no_git_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for host-side git: no variables through which a parent git
    leaks in, no system or global config, and `HOST_GIT_CONFIG` on top."""
    base = dict(os.environ if env is None else env)
    for name in _GIT_LEAKY_VARS:
        base.pop(name, None)
    for name in [n for n in base if n.startswith("GIT_CONFIG_")]:
        del base[name]
    base["GIT_ADVICE"] = "0"
    base["GIT_CONFIG_NOSYSTEM"] = "1"
    base["GIT_CONFIG_GLOBAL"] = os.devnull
    base["GIT_CONFIG_COUNT"] = str(len(HOST_GIT_CONFIG))
    for index, (key, value) in enumerate(HOST_GIT_CONFIG.items()):
        base[f"GIT_CONFIG_KEY_{index}"] = key
        base[f"GIT_CONFIG_VALUE_{index}"] = value
    return base


class _CappedBuffer:
    """Keeps the first `_HEAD_BYTES` and the last bytes up to `cap` in total."""

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 2 * _HEAD_BYTES)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = _HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        limit = self.cap - _HEAD_BYTES
        if len(self.tail) > limit:
            excess = len(self.tail) - limit
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes elided by patchheal ...]\n" if self.dropped else ""
        return (
            bytes(self.head).decode("utf-8", "replace")
            + middle
            + bytes(self.tail).decode("utf-8", "replace")
        )


def kill_process_group(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still there."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(
    argv: Sequence[str] | str,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_output: Callable[[bytes], None] | None = None,
    stdin: bytes | None = None,
    check: bool = False,
    harness: str = "local",
) -> CommandResult:
    """Run a command; a `str` runs through `/bin/sh -c`, a sequence does not.

    Never raises for the command's own failure unless `check` is set; a
    timeout is reported in `CommandResult.timed_out` after the whole process
    group has been killed.
    """
    shown = argv if isinstance(argv, str) else " ".join(argv)
    args: list[str] = ["/bin/sh", "-c", argv] if isinstance(argv, str) else list(argv)
    started = time.monotonic()
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):  # the child may not read its input
            proc.stdin.write(stdin)
        proc.stdin.close()
    assert proc.stdout is not None
    buffer = _CappedBuffer(output_cap)
    timed_out: str | None = None
    last_output = started
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    try:
        open_pipe = True
        while open_pipe:
            now = time.monotonic()
            waits = [1.0]
            if timeout is not None:
                waits.append(started + timeout - now)
            if idle_timeout is not None:
                waits.append(last_output + idle_timeout - now)
            if timeout is not None and now - started >= timeout:
                timed_out = "wall"
                break
            if idle_timeout is not None and now - last_output >= idle_timeout:
                timed_out = "idle"
                break
            for _key, _ in selector.select(max(0.0, min(waits))):
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_pipe = False
                    break
                last_output = time.monotonic()
                buffer.add(chunk)
                if on_output is not None:
                    on_output(chunk)
        if timed_out is not None:
            kill_process_group(proc)
        else:
            # The pipe closed; the process may still be finishing.
            remaining = None if timeout is None else max(0.1, started + timeout - time.monotonic())
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = "wall"
                kill_process_group(proc)
    except BaseException:
        kill_process_group(proc)
        raise
    finally:
        selector.close()
        proc.stdout.close()
    exit_code = None if timed_out is not None else proc.returncode
    result = CommandResult(
        command=shown,
        exit_code=exit_code,
        output=buffer.text(),
        duration_seconds=time.monotonic() - started,
        timed_out=timed_out,
        truncated=buffer.dropped > 0,
        harness=harness,
    )
    if check and not result.passed:
        raise CommandFailed(args, result)
    return result


def git_location(path: Path) -> dict[str, str]:
    """GIT_DIR and GIT_WORK_TREE of a job worktree, found without reading its `.git`.

    A step may rewrite the worktree's `.git` file to point at a repository it
    made (with hooks, `core.fsmonitor` or filters that host-side git would run).
    So for a worktree `<job>/wt/<name>` the git directory is the admin
    directory of `<job>/repo.git` whose `gitdir` file (written by
    `git worktree add`; steps see it read-only) names `<path>/.git`. Any other
    directory (the user's repository, the private bare one) is its own: {}.
    """
    path = Path(path).absolute()
    admin_root = path.parent.parent / "repo.git" / "worktrees"
    if path.parent.name != "wt" or not admin_root.is_dir():
        return {}
    wanted = path.resolve()
    for admin in sorted(admin_root.iterdir()):
        recorded = admin / "gitdir"
        if not recorded.is_file():
            continue
        named = Path(recorded.read_text(errors="replace").strip())
        if named.name == ".git" and named.parent.resolve() == wanted:
            return {"GIT_DIR": str(admin), "GIT_WORK_TREE": str(path)}
    raise PatchhealError(f"{path} is not a registered worktree of {admin_root.parent}")


def git(
    *args: str,
    cwd: Path | str,
    check: bool = True,
    stdin: bytes | None = None,
    timeout: float | None = 300,
    location: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run git with leaked GIT_* variables stripped, hardened config and a fixed identity.

    `location` (GIT_DIR and GIT_WORK_TREE) names the repository explicitly, so
    git never discovers one from a `.git` that a step could have rewritten.
    """
    env = no_git_env()
    env.update(git_location(Path(cwd)) if location is None else location)
    env.setdefault("GIT_AUTHOR_NAME", "patchheal")
    env.setdefault("GIT_AUTHOR_EMAIL", "patchheal@localhost")
    env.setdefault("GIT_COMMITTER_NAME", "patchheal")
    env.setdefault("GIT_COMMITTER_EMAIL", "patchheal@localhost")
    env["GIT_TERMINAL_PROMPT"] = "0"
    return run(["git", *args], cwd=cwd, env=env, check=check, stdin=stdin, timeout=timeout)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) from /proc, None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; the
    # fields after its last ')' are fixed: state is field 3, starttime 22.
    rest = stat[stat.rfind(")") + 2 :].split()
    return rest[0], int(rest[19])


def process_start(pid: int) -> int | None:
    """The kernel's start time of `pid`: with the pid, it names one process across pid reuse."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Whether process `pid` (started at `started`, if known) still runs on this host.

    The one liveness check of locks, containers and workspaces: a zombie is
    dead, and a pid reused by another process is not the one that was recorded.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    stat = _proc_stat(pid)
    if stat is None:
        return True
    state, start = stat
    if state in ("Z", "X"):
        return False
    return started is None or start == started
