"""Candidates from patch files on disk, tried in name order.

The strategy tag comes from a `# strategy: TAG` line (or `Strategy: TAG`)
in the patch's preamble, else from the file name (`02-add_guard.patch` →
`add_guard`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from patchheal.config import JobSpec
from patchheal.errors import SpecError
from patchheal.harness.results.untrusted import read_regular
from patchheal.models import Candidate
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import PatchfilesConfig

_STRATEGY_LINE = re.compile(
    r"^(?:#\s*)?strategy:\s*([A-Za-z0-9_.-]+)\s*$", re.IGNORECASE | re.MULTILINE
)
_RATIONALE_LINE = re.compile(r"^(?:#\s*)?rationale:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_NAME_PREFIX = re.compile(r"^\d+[-_]")
_SUBJECT = re.compile(r"^Subject:\s*(?:\[[^\]]*\]\s*)?(.+?)\s*$", re.MULTILINE)
_MAIL_HEADER = re.compile(r"^(From |From:|Date:|Subject:|Message-Id:|[A-Z][\w-]*: )")
# The proposer's explanation a report shows is a paragraph, not the patch file's prose.
MAX_EXPLANATION_CHARS = 600


def explanation(text: str) -> str:
    """Why the patch file's author made it: its `rationale:` line, else the commit message
    `git format-patch` wrote (subject and body, up to the `---` before the diff), else
    the prose before the diff. Empty when the file is a bare diff."""
    if match := _RATIONALE_LINE.search(text):
        return match.group(1)
    head = re.split(r"^(?:diff --git |--- |Index: )", text, maxsplit=1, flags=re.MULTILINE)[0]
    lines = head.replace("\r\n", "\n").split("\n")
    if subject := _SUBJECT.search(head):
        body_start = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
        body = []
        for line in lines[body_start:]:
            if line.strip() == "---":
                break  # format-patch's diffstat follows
            body.append(line.strip())
        title = subject.group(1).rstrip()
        rest = " ".join(" ".join(body).split())
        if rest and not title.endswith((".", ":", "!", "?")):
            title += "."
        words = f"{title} {rest}".split()
    else:
        words = " ".join(
            line.lstrip("# ").strip()
            for line in lines
            if not _STRATEGY_LINE.match(line) and not _MAIL_HEADER.match(line)
        ).split()
    return " ".join(words)[:MAX_EXPLANATION_CHARS]


# A candidate patch is small; a file this big is a mistake (or a log), not a patch.
MAX_PATCH_BYTES = 4 * 1024 * 1024


class PatchfilesProposer:
    """Yields each patch file once, in order."""

    name = "patchfiles"

    def __init__(
        self, config: PatchfilesConfig, *, job: JobSpec, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        del job, sleep
        # Files found in a folder are never followed through a symlink (one put
        # /etc/passwd into report.md); paths the spec names one by one are the user's.
        self._nofollow = config.dir is not None
        self._paths = self._collect(config)
        self._next = 0

    @staticmethod
    def _collect(config: PatchfilesConfig) -> list[Path]:
        if config.dir is not None:
            if not config.dir.is_dir():
                raise SpecError(f"patchfiles proposer: {config.dir} is not a directory")
            paths = sorted(p for p in config.dir.iterdir() if p.suffix in {".patch", ".diff"})
            links = [str(p) for p in paths if p.is_symlink()]
            if links:
                raise SpecError(
                    "patchfiles proposer: symlinks are not read from a candidates folder "
                    f"(copy the patch in instead): {', '.join(links[:5])}"
                )
            if not paths:
                raise SpecError(f"patchfiles proposer: no *.patch or *.diff files in {config.dir}")
            return paths  # each file judged when read: one bad file is one bad candidate
        paths = list(config.paths)
        # is_file() is false for a FIFO or a device, which would block or never end when
        # read. Paths named one by one are the user's typo to fix before anything runs.
        unusable = [str(p) for p in paths if not p.is_file()]
        if unusable:
            raise SpecError(
                "patchfiles proposer: not regular files (missing, a directory, a FIFO or a "
                f"device): {', '.join(unusable[:5])}"
            )
        return paths

    @property
    def remaining(self) -> int:
        return len(self._paths) - self._next

    def peek_all(self) -> list[Candidate]:
        """Every candidate not proposed yet, without consuming them (for screening)."""
        return [self._load(path) for path in self._paths[self._next :]]

    def drop(self, labels: set[str]) -> None:
        """Never propose these files (screened out against memory)."""
        kept = [p for p in self._paths[self._next :] if p.name not in labels]
        self._paths = self._paths[: self._next] + kept

    def propose(self, request: ProposalRequest) -> Candidate | None:
        del request
        if self._next >= len(self._paths):
            return None
        path = self._paths[self._next]
        self._next += 1
        return self._load(path)

    def _read(self, path: Path) -> tuple[str, str]:
        """(the patch text, "") or ("", why the file cannot be a candidate)."""
        try:
            size = (path.lstat() if self._nofollow else path.stat()).st_size
            if size > MAX_PATCH_BYTES:
                return "", (
                    f"it is {size:,} bytes, over the {MAX_PATCH_BYTES:,}-byte limit of a "
                    "candidate patch (a log or a build output, not a patch?)"
                )
            if self._nofollow:
                data = read_regular(path, MAX_PATCH_BYTES)
            else:
                with path.open("rb") as handle:
                    data = handle.read(MAX_PATCH_BYTES + 1)
        except OSError as exc:
            return "", f"it cannot be read ({exc.strerror or exc})"
        if len(data) > MAX_PATCH_BYTES:
            return "", f"it is over the {MAX_PATCH_BYTES:,}-byte limit of a candidate patch"
        if b"\0" in data:
            return "", "it is a binary file (NUL bytes), not a text patch"
        try:
            return data.decode("utf-8"), ""
        except UnicodeDecodeError as exc:
            return "", f"it is not UTF-8 text (byte {exc.start}), not a text patch"

    def _load(self, path: Path) -> Candidate:
        text, problem = self._read(path)
        if problem:
            # One bad file is one bad candidate: recorded with the reason (an empty
            # candidate, never run), and the heal goes on with the other files.
            return Candidate(
                diff="",
                strategy=_NAME_PREFIX.sub("", path.stem) or "unspecified",
                rationale=f"the patch file {path.name} was not used: {problem}",
                proposer=self.name,
                label=path.name,
            )
        strategy_match = _STRATEGY_LINE.search(text)
        strategy = (
            strategy_match.group(1)
            if strategy_match
            else _NAME_PREFIX.sub("", path.stem) or "unspecified"
        )
        return Candidate(
            diff=text,
            strategy=strategy,
            rationale=explanation(text),
            proposer=self.name,
            label=path.name,
        )
