"""The sandbox every step container gets, in one place.

Defaults: the worktree bind-mounted at a fixed path as the only writable host
path, a read-only root filesystem with a tmpfs /tmp, no network but loopback,
a non-root user, CPU/memory/PID limits, all capabilities dropped, no privilege
escalation, and the deterministic environment with nothing inherited but the
variables named for passthrough.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from patchheal.harness.base import DETERMINISTIC_ENV
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import bytecode, gitmeta
from patchheal.harness.tables import SandboxSpec

# A fixed unprivileged user so a step never runs as root, even in an image
# whose worktree is owned by root on the host.
SANDBOX_UID = 1000
VENV = "/opt/patchheal/venv"
NODE_DIR = "/opt/patchheal/node"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STEP_PATH = f"{VENV}/bin:{NODE_DIR}/node_modules/.bin:{BASE_PATH}"
# Bytecode compiled before any candidate, from the image's own files (engine/bytecode.py).
PYCACHE_PREFIX = bytecode.PREFIX

_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def size_bytes(text: str) -> int:
    unit = text[-1].lower()
    if unit in _UNITS:
        return int(float(text[:-1]) * _UNITS[unit])
    return int(float(text))


def process_limits(box: SandboxSpec) -> list[Any]:
    """The step's per-process rlimits: a data limit below the container's memory.

    The cgroup limit alone turns a test that allocates without end (it consumes an
    infinite iterator, say) into an OOM kill of the whole step: no test is named, the
    failure reads as infrastructure and is never patched, where a plain venv on a CI
    runner raises `MemoryError` in that test. RLIMIT_DATA counts a process's private
    writable memory, not the address space it only reserves (V8's and the JVM's
    PROT_NONE reservations, thread stacks), so runtimes that reserve much and use little
    still start; RLIMIT_AS would break them.
    """
    from docker.types import Ulimit

    if box.process_memory == "off":
        return []
    limit = (
        size_bytes(box.memory) * 7 // 8
        if box.process_memory == "auto"
        else min(size_bytes(box.process_memory), size_bytes(box.memory))
    )
    # Only the soft limit: a step that sets its own (a test of its MemoryError handling)
    # may raise it, as under a CI runner's unlimited hard limit; the cgroup still caps.
    return [Ulimit(name="data", soft=limit, hard=-1)]


def resolve_user(defn: HarnessDef, worktree: Path) -> str:
    """'UID:GID' the step runs as: never root.

    'auto' takes the worktree's owner, as a CI runner's user owns its checkout;
    when root owns the worktree, a fixed unprivileged uid, to which the worktree is
    then given (`make_writable`).
    """
    if defn.sandbox.user != "auto":
        uid, _, gid = defn.sandbox.user.partition(":")
        return f"{uid}:{gid or uid}"
    info = worktree.stat()
    if info.st_uid != 0:
        return f"{info.st_uid}:{info.st_gid}"
    return f"{SANDBOX_UID}:{SANDBOX_UID}"


def make_writable(worktree: Path, user: str) -> None:
    """Make `worktree` the step user's own, as a CI runner's checkout is its user's.

    As root (the usual host of the Docker harness), every file and directory of the
    worktree is given to `user` (chown, never following a symlink): whatever a step
    may do to its own files on a runner (set their times, modes, locks; build in
    them), it may do here. Without root, a worktree that `user` does not own gets
    group/other write bits instead (writes work; times and modes of files it did not
    make do not). Git tracks the executable bit only, so neither shows in a diff.

    The worktree's own `.git` (file or directory) stays the host owner's: a step that
    could rewrite it could point host-side git at a repository it made. So does the
    worktree's root directory (made writable for all and sticky instead): git trusts a
    repository only when its top directory is the caller's. The worktree
    root stays private to its parent directory, so a host user of the same uid
    cannot reach it. Host-side git names the repository explicitly (`proc.git_location`:
    GIT_DIR is set, so git's ownership check of discovered repositories does not apply).
    """
    uid_text, _, gid_text = user.partition(":")
    uid, gid = int(uid_text), int(gid_text or uid_text)
    if os.geteuid() == 0:
        _give(worktree, uid, gid)
        return
    if worktree.stat().st_uid == uid:
        return
    for root, dirs, files in os.walk(worktree):
        if ".git" in dirs and Path(root) == worktree:
            dirs.remove(".git")
        _add_bits(Path(root), 0o777)
        for name in files:
            path = Path(root) / name
            if not path.is_symlink() and path != worktree / ".git":
                _add_bits(path, 0o666)


def _give(worktree: Path, uid: int, gid: int) -> None:
    """chown every entry of `worktree` but its `.git` to uid:gid. `os.fwalk` holds each
    directory open and changes entries relative to it, so a symlink swapped in for a
    directory is never followed out of the tree."""

    def own(name: str, fd: int | None) -> None:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if (info.st_uid, info.st_gid) != (uid, gid):
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    for top, dirs, files, fd in os.fwalk(worktree, follow_symlinks=False):
        at_root = Path(top) == worktree
        if at_root:
            # The root directory itself stays the host's, writable by all and sticky: git
            # refuses a repository whose top directory another uid owns ("dubious
            # ownership"; host git reads plain repositories by discovery), and the sticky
            # bit keeps the step from moving the host's `.git` aside in it.
            _add_bits(worktree, 0o1777)
            if ".git" in dirs:
                dirs.remove(".git")
        for name in [*dirs, *files]:
            if not (at_root and name == ".git"):
                own(name, fd)


def _add_bits(path: Path, bits: int) -> None:
    mode = path.lstat().st_mode
    if stat.S_IMODE(mode) & bits != bits:
        path.chmod(stat.S_IMODE(mode) | bits)


def environment(
    defn: HarnessDef, passthrough: Sequence[str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The deterministic environment, harness overrides, then named host variables."""
    env = {
        **DETERMINISTIC_ENV,
        "HOME": "/tmp",
        "PATH": STEP_PATH,
        "VIRTUAL_ENV": VENV,
        # Bytecode is read only from the image's own, never from the tree (and none is
        # written): a .pyc a candidate put in __pycache__ (unchecked-hash: never compared
        # with its .py) would run instead of the source every gate judged.
        "PYTHONPYCACHEPREFIX": PYCACHE_PREFIX,
        "PIP_NO_CACHE_DIR": "1",
        "npm_config_cache": "/tmp/.npm",
        "npm_config_update_notifier": "false",
    }
    env.update(defn.env)
    for name in (*defn.env_passthrough, *passthrough):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra or {})
    return env


def git_metadata_dirs(worktree: Path) -> list[str]:
    """The git directories of a job worktree, for read-only mounts.

    Steps that call git (`git describe` for a version, `git diff` in a lint)
    must see the repository; the worktree's `.git` names the job's private
    repository, so that repository is mounted read-only at the same path. It
    holds only the base commit and patchheal's own commits (see workspace.py),
    so nothing later leaks in. Found from patchheal's records (`gitmeta`),
    never from the worktree's `.git`, which a step may have rewritten.
    """
    found = gitmeta.recorded(worktree)
    return [] if found is None or not found[1].is_dir() else [str(found[1])]


def git_file_mount(worktree: Path, workdir: str) -> list[Any]:
    """A `.git` file written from patchheal's records, bound read-only over the worktree's
    (a mount point cannot be rewritten, renamed or removed from inside), so a step
    cannot redirect git to a repository it made; host git does not trust it either
    (`proc.git_location`)."""
    from docker.types import Mount

    source = gitmeta.git_file(worktree)
    if source is None:
        return []
    return [Mount(target=f"{workdir}/.git", source=str(source), type="bind", read_only=True)]


# Git refuses a repository owned by another user unless told it is safe; the
# container's user is not the host owner of the mounted private repository.
GIT_SAFE_ENV = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
}


# Seconds past the host-enforced wall timeout before the container's own
# limit fires: the host kill (and its output) always comes first.
SELF_LIMIT_GRACE = 10.0
_SELF_LIMIT = (
    'if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL "$1" /bin/sh -c "$2"; fi; '
    'exec /bin/sh -c "$2"'
)


def self_limited(command: str, wall_limit: float | None) -> list[str]:
    """The container command: `command`, killed from inside after `wall_limit` + grace.

    coreutils `timeout` kills the step's process group; the init process then
    exits and the container stops. An image without `timeout` runs the command
    unlimited from inside (the host still enforces the wall timeout).
    """
    if wall_limit is None:
        return ["/bin/sh", "-c", command]
    seconds = str(int(wall_limit + SELF_LIMIT_GRACE))
    return ["/bin/sh", "-c", _SELF_LIMIT, "patchheal-step", seconds, command]


def step_container_kwargs(
    defn: HarnessDef,
    *,
    image: str,
    command: str,
    worktree: Path,
    user: str,
    env: Mapping[str, str],
    labels: Mapping[str, str],
    host_mounts: Sequence[str] = (),
    network: str | None = None,
    extra_mounts: Sequence[tuple[str, str, bool]] = (),
    volumes: Sequence[Any] = (),
    wall_limit: float | None = None,
) -> dict[str, Any]:
    """Arguments for `containers.create` of a step container.

    With `wall_limit`, the container enforces it itself (`self_limited`): it
    dies on time even when the patchheal process that watches it was killed.
    `volumes`: further docker `Mount`s (the results tmpfs: results/volume.py).
    """
    from docker.types import Mount

    box = defn.sandbox
    memory = size_bytes(box.memory)
    mounts = [Mount(target=box.workdir, source=str(worktree), type="bind", read_only=False)]
    mounts += [Mount(target=p, source=p, type="bind", read_only=True) for p in host_mounts]
    git_dirs = git_metadata_dirs(worktree)
    mounts += [Mount(target=p, source=p, type="bind", read_only=True) for p in git_dirs]
    mounts += [Mount(target=t, source=s, type="bind", read_only=r) for s, t, r in extra_mounts]
    mounts += git_file_mount(worktree, box.workdir)
    mounts += volumes
    environment = {**(GIT_SAFE_ENV if git_dirs else {}), **env}
    return {
        "image": image,
        "command": self_limited(command, wall_limit),
        "labels": dict(labels),
        "user": user,
        "working_dir": box.workdir,
        "environment": environment,
        "network_mode": network or box.network,
        "read_only": box.read_only,
        "tmpfs": {"/tmp": f"rw,exec,nosuid,size={size_bytes(box.tmpfs_size)},mode=1777"},
        "mounts": mounts,
        "nano_cpus": int(box.cpus * 1e9),
        "mem_limit": memory,
        "memswap_limit": memory,
        "pids_limit": box.pids,
        "ulimits": process_limits(box),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "stdin_open": False,
        "tty": False,
    }
