"""The tripwire's `stat` from a folder's descriptor (collectors/patchheal_watch.py).

The hook looks paths under the temporary folder and the project up from a descriptor of
that folder, not from `/` (on a FUSE container root each absolute lookup costs a round
trip to the daemon). That must give what `os.stat` gives for every spelling of a path, and
a step that closes or replaces the descriptor must not change a refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from patchheal.harness.results.collectors import COLLECTORS


def _watch_module() -> dict[str, Any]:
    """patchheal_watch's code in a namespace of its own, as patchheal_monitor runs it."""
    space: dict[str, Any] = {"__name__": "patchheal_watch_test"}
    path = COLLECTORS / "patchheal_watch.py"
    exec(compile(path.read_text(), str(path), "exec"), space)
    return space


def _anchored(space: dict[str, Any], maker: str, anchor: Path) -> Any:
    """`maker` of the watch module over the one folder `anchor`."""
    return space[maker](space["open_anchors"]((str(anchor),)))


def _tree(root: Path) -> Path:
    """An anchor folder with files, folders and links of every kind, and one outside it."""
    anchor = root / "anchor"
    (anchor / "dir" / "deep").mkdir(parents=True)
    (anchor / "file").write_text("x")
    (anchor / "dir" / "inner").write_text("y")
    outside = root / "outside"
    outside.mkdir()
    (outside / "far").write_text("z")
    (anchor / "to-outside").symlink_to(outside / "far")
    (anchor / "to-dir").symlink_to(outside)
    (anchor / "relative-up").symlink_to("../outside/far")
    (anchor / "dangling").symlink_to(root / "missing")
    return anchor


def _spellings(anchor: Path) -> list[str]:
    a = str(anchor)
    return [
        a,
        f"{a}/",
        f"{a}/file",
        f"{a}//file",
        f"{a}/./file",
        f"{a}/dir/deep/../inner",
        f"{a}/dir/",
        f"{a}/..",
        f"{a}/../outside/far",
        f"{a}/to-outside",
        f"{a}/to-dir/far",
        f"{a}/relative-up",
        f"{a}/dangling",
        f"{a}/missing",
        f"{a}/file/not-a-dir",
        f"{a}x/file",  # a sibling whose name starts like the anchor's
        "/",
        str(anchor.parent / "outside" / "far"),
    ]


def _outcome(call: Callable[[str], os.stat_result], path: str) -> object:
    try:
        found = call(path)
    except OSError as error:
        return type(error).__name__
    return (found.st_dev, found.st_ino)


def test_every_spelling_gives_what_stat_gives(tmp_path: Path) -> None:
    anchor = _tree(tmp_path)
    (tmp_path / "anchorx").mkdir()
    (tmp_path / "anchorx" / "file").write_text("sibling")
    anchored = _anchored(_watch_module(), "make_anchored_stat", anchor)
    for path in _spellings(anchor):
        assert _outcome(anchored, path) == _outcome(os.stat, path), path


def test_a_replaced_or_closed_descriptor_gives_what_stat_gives(tmp_path: Path) -> None:
    anchor = _tree(tmp_path)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "file").write_text("decoy")
    before = {p.name for p in Path("/proc/self/fd").iterdir()}
    anchored = _anchored(_watch_module(), "make_anchored_stat", anchor)
    after = {p.name for p in Path("/proc/self/fd").iterdir()}
    (fd,) = {int(n) for n in after - before}
    assert fd >= 200, "the anchor stays out of the numbers a project's files get"
    target = f"{anchor}/file"
    other = os.open(decoy, os.O_RDONLY)
    try:
        os.dup2(other, fd)  # the step puts another folder under the anchor's number
        assert _outcome(anchored, target) == _outcome(os.stat, target)
        os.close(fd)  # or closes it
        assert _outcome(anchored, target) == _outcome(os.stat, target)
    finally:
        os.close(other)


def test_inside_is_never_wrong_and_needs_no_resolution_for_plain_paths(tmp_path: Path) -> None:
    """`make_anchored_inside` answers True only for a path that resolves into the anchor,
    for every spelling; a plain path below it (a file, a file about to be made in a folder
    that is not there yet) needs no full resolution; a link below it always does."""
    anchor = _tree(tmp_path)
    (tmp_path / "anchorx").mkdir()
    space = _watch_module()
    inside = _anchored(space, "make_anchored_inside", anchor)
    real = os.path.realpath(anchor) + "/"
    extra = [f"{anchor}/new-file", f"{anchor}/dir/new/deeper/file", f"{anchor}/to-dir/new"]
    for path in _spellings(anchor) + extra:
        if inside(path):
            assert (os.path.realpath(path) + "/").startswith(real), path
    for path in (f"{anchor}/file", f"{anchor}/dir/inner", f"{anchor}//dir/./inner", *extra[:2]):
        assert inside(path), path
    for path in (f"{anchor}/to-outside", f"{anchor}/to-dir/far", f"{anchor}/relative-up"):
        assert not inside(path), path
    assert not inside(f"{anchor}/dir/deep/../inner")  # `..`: left to the full resolution
    assert not inside(str(tmp_path / "anchorx" / "file"))


def _run_step(script: str, tmp: Path, results: Path) -> subprocess.CompletedProcess[str]:
    """`script` as a step with the collectors armed, `tmp` its temporary folder."""
    env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(COLLECTORS),
        "PATCHHEAL_RESULTS_DIR": str(results),
        "PATCHHEAL_RESULTS_TOKEN": "t" * 32,
    }
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


_STEP = textwrap.dedent(
    """
    import os, sys
    tmp, results = os.environ["TMPDIR"], os.environ["PATCHHEAL_RESULTS_DIR"]
    os.symlink(results, os.path.join(tmp, "link"))
    os.mkdir(os.path.join(tmp, "sub"))
    spellings = [
        f"{results}/forged.json",
        f"{tmp}//box/results/forged.json",
        f"{tmp}/sub/../box/results/forged.json",
        f"{tmp}/link/forged.json",
    ]

    def attempt(label):
        for path in spellings:
            try:
                with open(path, "w") as handle:
                    handle.write("{}")
                print(label, "WRITTEN", path)
            except PermissionError:
                print(label, "REFUSED", path)
        with open(os.path.join(tmp, "ok"), "w") as handle:
            handle.write("fine")
        print(label, "OWN FILE WRITTEN")

    attempt("plain")
    decoy = os.open(os.path.join(tmp, "sub"), os.O_RDONLY)
    for number in range(200, 260):
        try:
            os.fstat(number)
        except OSError:
            continue
        if number != decoy:
            os.dup2(decoy, number)
    attempt("replaced")
    os.closerange(3, 300)
    attempt("closed")
    """
)


@pytest.mark.parametrize("label", ["plain", "replaced", "closed"])
def test_a_write_into_the_results_is_refused_however_the_descriptor_is_treated(
    tmp_path: Path, label: str
) -> None:
    """The results folder under the temporary folder (an anchor), reached by its own name,
    a doubled slash, `..` and a link: refused before the step touches the descriptor, after
    it put another folder under the descriptor's number, and after it closed every one."""
    tmp = tmp_path / "tmp"
    results = tmp / "box" / "results"
    results.mkdir(parents=True)
    done = _run_step(_STEP, tmp, results)
    lines = [line for line in done.stdout.splitlines() if line.startswith(label + " ")]
    assert done.returncode == 0, done.stderr
    assert f"{label} OWN FILE WRITTEN" in lines, done.stdout
    written = [line for line in lines if " WRITTEN " in line]
    assert not written, written
    assert len([line for line in lines if " REFUSED " in line]) == 4, done.stdout
    assert not (results / "forged.json").exists()


_PROC_STEP = textwrap.dedent(
    """
    import os
    tmp = os.environ["TMPDIR"]
    link = os.path.join(tmp, "innocent")
    os.symlink("/proc/self/environ", link)
    os.symlink("/proc/self", os.path.join(tmp, "folder"))
    for label, path, flags in (
        ("read", link, os.O_RDONLY),
        ("exclusive", link, os.O_RDWR | os.O_CREAT | os.O_EXCL),
        ("nofollow", link, os.O_RDONLY | os.O_NOFOLLOW),
        ("directory", link, os.O_RDONLY | os.O_DIRECTORY),
        ("through-folder", os.path.join(tmp, "folder", "environ"), os.O_RDONLY | os.O_NOFOLLOW),
    ):
        try:
            os.close(os.open(path, flags))
            print(label, "OPENED")
        except PermissionError:
            print(label, "REFUSED")
        except OSError as error:
            print(label, type(error).__name__)
    """
)


def test_opens_that_cannot_follow_a_last_link_skip_the_lookup_and_still_open_nothing(
    tmp_path: Path,
) -> None:
    """The hook does not look up an exclusive create, an O_NOFOLLOW or an O_DIRECTORY open
    for /proc (a lock file's loop pays no lookup): the kernel refuses each through a link
    to the environment, so it stays unread; a plain open through the same link, and an
    O_NOFOLLOW open of `environ` through a linked folder, are refused by the hook."""
    tmp = tmp_path / "tmp"
    (tmp / "box" / "results").mkdir(parents=True)
    done = _run_step(_PROC_STEP, tmp, tmp / "box" / "results")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == [
        "read REFUSED",
        "exclusive FileExistsError",
        "nofollow OSError",  # ELOOP: the kernel refuses the link itself
        "directory NotADirectoryError",
        "through-folder REFUSED",
    ], done.stdout


_FD_TARGET = textwrap.dedent(
    """
    import os, sys
    space = {"__name__": "w"}
    path = sys.argv[1]
    exec(compile(open(path).read(), path, "exec"), space)
    fd_target = space["make_fd_target"]()
    tmp = sys.argv[2]
    mine = os.open(os.path.join(tmp, "parent"), os.O_CREAT | os.O_WRONLY)
    print("PARENT", fd_target(mine) == os.readlink(f"/proc/self/fd/{mine}"))
    pid = os.fork()
    if pid == 0:
        os.close(mine)
        theirs = os.open(os.path.join(tmp, "child"), os.O_CREAT | os.O_WRONLY)
        assert theirs == mine  # the same number, another file, in the child only
        ok = fd_target(theirs) == os.path.join(tmp, "child")
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status) == 0)
    for number in range(200, 260):
        try:
            os.fstat(number)
        except OSError:
            continue
        decoy = os.open(tmp, os.O_RDONLY)
        os.dup2(decoy, number)  # the step puts a folder of its own under the number
    print("REPLACED", fd_target(mine) == os.path.join(tmp, "parent"))
    """
)


def test_a_descriptors_target_is_the_processs_own(tmp_path: Path) -> None:
    """The hook reads what a descriptor names from its own `/proc/self/fd`: the same as
    `os.readlink` in the process, the child's own after a fork, and after the step puts
    another folder under the hook's descriptor number."""
    done = subprocess.run(
        [sys.executable, "-c", _FD_TARGET, str(COLLECTORS / "patchheal_watch.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PARENT", "True", "CHILD", "True", "REPLACED", "True"], (
        done.stdout
    )
