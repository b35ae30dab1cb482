"""Bytecode a step reads: compiled before any candidate, from the image's files, never the tree.

A step runs with `PYTHONDONTWRITEBYTECODE=1` and `PYTHONPYCACHEPREFIX` pointed at
`PREFIX` (engine/sandbox.py): Python reads bytecode only under `PREFIX` and writes
none, so no `.pyc` of the worktree (a candidate's unchecked-hash one, say) is ever
run. With nothing under `PREFIX`, every run compiled the standard library and the
venv's packages again: `python -m pytest --version` took 0.83 s against 0.14 s with
them compiled (the python harness image, this machine). So `PREFIX` is filled before
any candidate exists: the standard library when a Debian root filesystem is built
(images/rootfs.py), the venv at dependency setup (setup/deps.py), and whatever
of the worktree setup compiled there is removed. Python checks each file against its
source's mtime and size, so a source changed later is compiled again, never
shadowed; the step's root filesystem is read-only, and `PREFIX` is root's.
"""

from __future__ import annotations

PREFIX = "/opt/patchheal/pycache"

# pip is never imported by a step's tests and is the venv's largest package.
_SKIP = r"/site-packages/pip/"


def compile_script(workdir: str) -> str:
    """`python -c` source that compiles the interpreter's stdlib and its (venv's) packages
    into `PREFIX` (up-to-date files are skipped), then drops anything of `workdir`."""
    return (
        "import compileall, re, shutil, sys, sysconfig; "
        f"sys.pycache_prefix = {PREFIX!r}; "
        "paths = sysconfig.get_paths(); "
        "[compileall.compile_dir(d, quiet=2, workers=0, rx=re.compile("
        f"{_SKIP!r})) for d in sorted({{paths['stdlib'], paths['purelib'], paths['platlib']}})]; "
        f"shutil.rmtree({PREFIX!r} + {workdir!r}, ignore_errors=True)"
    )


def rootfs_hook() -> str:
    """A `/bin/sh -c` hook (root directory as `$1`): the standard library of the root's
    python3, compiled into `PREFIX` once per image; a root without python3 is left as is."""
    script = (
        "import compileall, sys, sysconfig; "
        f"sys.pycache_prefix = {PREFIX!r}; "
        "compileall.compile_dir(sysconfig.get_paths()['stdlib'], quiet=2, workers=0)"
    )
    python = "/usr/bin/python3"
    return f'if [ -x "$1{python}" ]; then chroot "$1" {python} -I -c "{script}" || true; fi'
