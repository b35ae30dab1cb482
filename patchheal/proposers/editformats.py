"""Edit formats models produce reliably: SEARCH/REPLACE blocks and unified diffs.

`parse_reply` pulls the strategy tag, the rationale, the SEARCH/REPLACE
blocks and the unified diffs out of a model's free-text reply.
`apply_reply` writes them into a worktree, all or nothing:

- a SEARCH/REPLACE block is located with `matching.locate` (exact, then
  whitespace-insensitive, then a fuzzy window), refusing ambiguous matches;
  an empty SEARCH creates a new file and is refused for an existing one;
- a unified diff is applied with `git apply --recount` when it is exact, else
  each hunk is turned into a SEARCH/REPLACE edit (context and removed lines
  → SEARCH, context and added lines → REPLACE) and located the same way,
  because models often get line numbers and context slightly wrong.

The caller then takes the worktree's own diff as the candidate, so every
candidate is a canonical `git diff`, whatever format the model wrote.
Paths outside the worktree (absolute, `..`, through a symlink, or in `.git`)
are refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchheal import proc
from patchheal.errors import PatchApplyError
from patchheal.proposers.matching import DEFAULT_THRESHOLD, locate, splice

_HEAD = re.compile(r"^\s*<{5,9}\s*SEARCH\b")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_TAIL = re.compile(r"^\s*>{5,9}\s*REPLACE\b")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_STRATEGY = re.compile(
    r"^[*#>\s-]*strategy(?:\s+tag)?[*\s]*:[*\s]*[`\"']*([A-Za-z][\w.-]*)", re.I | re.M
)
_RATIONALE = re.compile(r"^[*#>\s-]*rationale[*\s]*:[*\s]*(.+?)\s*$", re.I | re.M)
_DIFF_LINE = re.compile(r"^([ +\-\\]|@@|diff --git |index |new file mode |deleted file mode |$)")


@dataclass(frozen=True)
class Edit:
    """Replace `search` by `replace` in `path`; `delete` removes the file."""

    path: str
    search: str
    replace: str
    delete: bool = False


@dataclass(frozen=True)
class ParsedReply:
    strategy: str | None
    rationale: str | None
    edits: tuple[Edit, ...]
    diffs: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.edits and not self.diffs


def _filename(lines: Sequence[str], head: int, previous: str | None) -> str | None:
    """The path named just above a SEARCH marker (skipping fences and blanks)."""
    for j in range(head - 1, max(-1, head - 4), -1):
        raw = lines[j].strip()
        if not raw or _FENCE.match(raw):
            continue
        name = raw.strip("*`#:").strip()
        name = re.sub(r"^(?:file(?:name)?|path)\s*:\s*", "", name, flags=re.I).strip("*`'\" ")
        if name and " " not in name and ("." in name or "/" in name):
            return name
        break
    return previous


def _search_replace_blocks(lines: list[str], used: set[int]) -> tuple[list[Edit], list[str]]:
    edits: list[Edit] = []
    problems: list[str] = []
    previous: str | None = None
    i = 0
    while i < len(lines):
        if not _HEAD.match(lines[i]):
            i += 1
            continue
        path = _filename(lines, i, previous)
        divider = next((j for j in range(i + 1, len(lines)) if _DIVIDER.match(lines[j])), None)
        tail = None
        if divider is not None:
            tail = next((j for j in range(divider + 1, len(lines)) if _TAIL.match(lines[j])), None)
        if divider is None or tail is None:
            problems.append(f"unterminated SEARCH/REPLACE block at reply line {i + 1}")
            break
        if path is None:
            problems.append(f"SEARCH/REPLACE block at reply line {i + 1} names no file")
        else:
            search = "".join(line + "\n" for line in lines[i + 1 : divider])
            replace = "".join(line + "\n" for line in lines[divider + 1 : tail])
            edits.append(Edit(path, search, replace))
            previous = path
        used.update(range(i, tail + 1))
        i = tail + 1
    return edits, problems


def _unified_diffs(lines: list[str], used: set[int]) -> list[str]:
    diffs: list[str] = []
    i = 0
    while i < len(lines):
        starts = lines[i].startswith("diff --git ") or (
            lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        )
        if not starts:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and _DIFF_LINE.match(lines[j]) and not _FENCE.match(lines[j]):
            j += 1
        block = lines[i:j]
        while block and not block[-1].strip():
            block.pop()
        if any(line.startswith("@@") for line in block):
            diffs.append("".join(line + "\n" for line in block))
            used.update(range(i, j))
        i = j
    return diffs


def parse_tags(text: str) -> tuple[str | None, str | None]:
    """`STRATEGY: tag` and `RATIONALE: one line`, wherever they appear in `text`."""
    strategy = _STRATEGY.search(text)
    rationale = _RATIONALE.search(text)
    tag = strategy.group(1).strip(".").lower()[:40] if strategy else None
    why = rationale.group(1).strip("*`\"' ")[:300] if rationale else None
    return tag or None, why or None


def parse_reply(text: str) -> ParsedReply:
    """Strategy, rationale, SEARCH/REPLACE edits and unified diffs in a model's reply."""
    lines = text.replace("\r\n", "\n").split("\n")
    used: set[int] = set()
    edits, problems = _search_replace_blocks(lines, used)
    diffs = [] if edits else _unified_diffs(lines, used)
    # Tags are read from the prose only, so a `strategy: ...` line of code is not one.
    prose = "\n".join(line for i, line in enumerate(lines) if i not in used)
    strategy, rationale = parse_tags(prose)
    return ParsedReply(strategy, rationale, tuple(edits), tuple(diffs), tuple(problems))


def _diff_path(header: str) -> str | None:
    name = header[4:].split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in {"a/", "b/"} else name


def diff_to_edits(diff: str) -> list[Edit]:
    """Each hunk of a unified diff as a SEARCH/REPLACE edit (line numbers ignored)."""
    edits: list[Edit] = []
    old: str | None = None
    new: str | None = None
    search: list[str] = []
    replace: list[str] = []

    def flush() -> None:
        path = new or old
        if path is not None and (search or replace):
            if new is None:
                edits.append(Edit(path, "", "", delete=True))
            else:
                edits.append(Edit(path, "".join(search) if old else "", "".join(replace)))
        search.clear()
        replace.clear()

    lines = diff.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            flush()
            old = _diff_path(line)
        elif line.startswith("+++ ") and i > 0 and lines[i - 1].startswith("--- "):
            new = _diff_path(line)
        elif line.startswith("@@"):
            flush()
        elif line.startswith("-"):
            search.append(line[1:] + "\n")
        elif line.startswith("+"):
            replace.append(line[1:] + "\n")
        elif line.startswith(" ") or line == "":
            # Models often drop the leading space of a blank context line.
            search.append(line[1:] + "\n")
            replace.append(line[1:] + "\n")
    flush()
    return edits


def resolve_inside(worktree: Path, name: str) -> Path:
    """`name` as a path inside `worktree`; refuses anything that leads out of it."""
    root = worktree.resolve()
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute():
        try:
            pure = PurePosixPath(Path(pure).resolve().relative_to(root).as_posix())
        except ValueError:
            raise PatchApplyError(f"edit outside the worktree refused: {name}") from None
    if not pure.parts or ".." in pure.parts or pure.parts[0] == ".git" or "\x00" in name:
        raise PatchApplyError(f"edit outside the worktree refused: {name}")
    target = root.joinpath(*pure.parts)
    if not target.resolve().is_relative_to(root):
        raise PatchApplyError(f"edit outside the worktree refused (symlink): {name}")
    return target


def apply_edits(
    worktree: Path, edits: Sequence[Edit], *, threshold: float = DEFAULT_THRESHOLD
) -> list[str]:
    """Apply every edit or none; returns the paths changed. Raises PatchApplyError."""
    pending: dict[Path, str | None] = {}
    names: dict[Path, str] = {}
    for edit in edits:
        target = resolve_inside(worktree, edit.path)
        names[target] = edit.path
        current = pending[target] if target in pending else _read(target, edit.path)
        if edit.delete:
            pending[target] = None
        elif not edit.search.strip():
            if current:
                raise PatchApplyError(
                    f"empty SEARCH for existing file {edit.path}: say which lines to replace"
                )
            pending[target] = edit.replace
        else:
            if current is None:
                raise PatchApplyError(f"file not found: {edit.path}")
            match = locate(current, edit.search, threshold=threshold, where=edit.path)
            pending[target] = splice(current, match, edit.replace)
    for target, text in pending.items():
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return sorted(names[t] for t in pending)


def _read(target: Path, name: str) -> str | None:
    if not target.exists():
        return None
    try:
        return target.read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError) as exc:
        raise PatchApplyError(f"cannot edit {name}: not a UTF-8 text file ({exc})") from None


def apply_diff(worktree: Path, diff: str, *, threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """Apply a unified diff: exactly with git when it fits, else hunk by hunk, tolerantly."""
    edits = diff_to_edits(diff)
    if not edits:
        raise PatchApplyError("the unified diff has no hunks")
    for edit in edits:
        resolve_inside(worktree, edit.path)  # refuse before git sees the paths
    result = proc.git(
        "apply",
        "--recount",
        "--whitespace=nowarn",
        "-",
        cwd=worktree,
        check=False,
        stdin=diff.encode("utf-8"),
    )
    if result.exit_code == 0:
        return sorted({e.path for e in edits})
    return apply_edits(worktree, edits, threshold=threshold)


def apply_reply(
    worktree: Path, reply: ParsedReply, *, threshold: float = DEFAULT_THRESHOLD
) -> list[str]:
    """Apply the reply's SEARCH/REPLACE edits, else its unified diffs; returns paths changed."""
    if reply.edits:
        return apply_edits(worktree, reply.edits, threshold=threshold)
    if not reply.diffs:
        raise PatchApplyError("the reply contains no SEARCH/REPLACE block and no unified diff")
    # One combined diff, so that several diffs also apply all or nothing.
    return apply_diff(worktree, "".join(reply.diffs), threshold=threshold)
