"""What the host's `pip download` may be given: named distributions from an index, nothing else
(issue 25, C1).

Every argument that reaches the host's pip is derived from a worktree whose
dependency files a verified candidate may have written (a step's setup
starts from the previous step's verified tree). pip builds whatever is not a
named distribution to learn its metadata, running its `setup.py` or build
backend as the user running patchheal: a local path (`./tools/helper`,
`tools/x.tar.gz`), a `file:` or VCS URL (`helper @ file:...`,
`git+file:///...`), an editable, or a distribution found through a local
`--find-links`/`--index-url` directory. So this is the last filter before the
host's pip, whatever produced the arguments: positional arguments must be
PEP 508 requirements by name with no URL; index locations must be http(s);
constraint files are rewritten keeping only such requirements; editables and
leftover requirement files are dropped. What is dropped is said, and left to
the setup container, which has no network and sees only the wheelhouse.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path

from patchheal.harness.setup.depgroups import group_requirements

_INDEX = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links"}
_CONSTRAINT = {"-c", "--constraint"}
_GROUP = "--group"  # expanded here (depgroups.py): the host's pip runs away from the tree
_DROPPED_WITH_VALUE = {"-e", "--editable", "-r", "--requirement", "--src", "--root", "--prefix",
                       "-d", "--dest"}  # fmt: skip
# `-d` (--dest) is patchheal's own; a second one from a worktree is dropped with the rest.
_WITH_VALUE = {"--trusted-host", "--only-binary", "--no-binary", "--platform", "--python-version",
               "--implementation", "--abi"}  # fmt: skip
_ARCHIVE = re.compile(r"\.(whl|zip|tar|tar\.gz|tgz|tar\.bz2|tbz|tar\.xz|txz|tar\.lz|tlz)$", re.I)


def named_requirement(text: str) -> bool:
    """Whether `text` is a requirement pip resolves by name from an index (no URL, no path)."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = text.strip()
    if not text or "/" in text or "\\" in text or text.startswith((".", "~")):
        return False
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return False
    return requirement.url is None and not _ARCHIVE.search(requirement.name)


def requirement_file_arguments(path: Path) -> list[str] | None:
    """The arguments a requirements (or constraints) file gives pip, None when unreadable.

    Read by pip's own line rules (pip-requirements-parser, which expands no
    environment variable and opens no URL): continued lines joined, comments
    dropped, a requirement one argument with its marker's quotes, its own
    options (`--hash`) left out, as `pip download` takes them only in a file.
    """
    from pip_requirements_parser import (
        InstallationError,
        TextLine,
        break_args_options,
        get_file_content,
        preprocess,
    )

    try:
        content = get_file_content(str(path))
    except InstallationError:
        return None
    out: list[str] = []
    for line in preprocess(content):
        if isinstance(line, TextLine):
            requirement, options = break_args_options(line.line)
            out += [requirement] if requirement else shlex.split(options)
    return out


def _remote(location: str) -> bool:
    return location.lower().startswith(("https://", "http://"))


class HostPipArgs:
    """Filters argument lists for the host's pip; owns the rewritten constraint files."""

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self.dropped: list[str] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="patchheal-hostpip-")
        self.cwd = Path(self._tmp.name) / "cwd"  # empty: no relative name finds a local file
        self.cwd.mkdir()
        self._count = 0

    def __enter__(self) -> HostPipArgs:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def filter(self, args: Sequence[str]) -> list[str]:
        """`args` with everything pip would build or read from a local path taken out."""
        out: list[str] = []
        items = list(args)
        while items:
            arg = items.pop(0)
            if re.fullmatch(r"-[ecrfid].+", arg):  # a short option with its value attached
                items.insert(0, arg[2:])
                arg = arg[:2]
            flag, equals, inline = arg.partition("=")
            if not arg.startswith("-") or not flag.startswith("--"):
                flag, equals, inline = arg, "", ""
            takes = flag in _INDEX | _CONSTRAINT | _DROPPED_WITH_VALUE | _WITH_VALUE | {_GROUP}
            value = inline if equals else (items.pop(0) if takes and items else "")
            if not arg.startswith("-"):
                self._keep_if(named_requirement(arg), [arg], out)
            elif flag in _DROPPED_WITH_VALUE:
                self.dropped.append(f"{flag} {value}")
            elif flag in _INDEX:
                self._keep_if(_remote(value), [flag, value], out)
            elif flag in _CONSTRAINT:
                out += [flag, str(self._constraints(value))]
            elif flag == _GROUP:
                group = group_requirements(self.worktree, value)
                if group is None:
                    self.dropped.append(f"{flag} {value}")
                for requirement in group or []:
                    self._keep_if(named_requirement(requirement), [requirement], out)
            elif takes:
                out += [flag, value]
            else:
                out.append(arg)
        return out

    def _keep_if(self, ok: bool, args: list[str], out: list[str]) -> None:
        if ok:
            out += args
        else:
            self.dropped.append(" ".join(args))

    def _constraints(self, name: str) -> Path:
        """A copy of a constraints file with only requirements by name (relative to the
        worktree, as the setup command runs there)."""
        source = Path(name) if Path(name).is_absolute() else self.worktree / name
        kept: list[str] = []
        # Unreadable or not a file (a FIFO would block): pip fails on it in the setup container.
        for arg in (requirement_file_arguments(source) if source.is_file() else None) or []:
            if named_requirement(arg):
                kept.append(arg)
            else:
                self.dropped.append(f"constraint {arg}")
        self._count += 1
        copy = Path(self._tmp.name) / f"constraints-{self._count}.txt"
        copy.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
        return copy
