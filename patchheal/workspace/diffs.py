"""Unified diffs: parse, list touched files, count, hash, and normalize.

Two hashes serve two questions. `exact_hash` identifies a diff's bytes (line
endings aside). `normalized_hash` identifies the *change*: the same edit
re-diffed with other context lines, other hunk boundaries or other
whitespace hashes the same, so the attempt store can refuse a repeat.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from patchheal.errors import NotADiff

if TYPE_CHECKING:
    from unidiff.patch import PatchedFile, PatchSet

DEV_NULL = "/dev/null"
_TOKEN = re.compile(r"\w+|[^\w\s]")
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")
_INDEX_LINE = re.compile(r"^index [0-9a-f]+\.\.([0-9a-f]+)", re.MULTILINE)


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _patchset(text: str) -> PatchSet:
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    try:
        return PatchSet(text)
    except UnidiffParseError as exc:
        raise NotADiff(f"malformed unified diff: {exc}") from None


def _more_hunk_lines(lines: list[str], i: int) -> bool:
    """Whether hunk body lines follow the blank line at `i` (so it is context)."""
    for line in lines[i + 1 :]:
        if line == "":
            continue
        if _HUNK_HEADER.match(line) or line.startswith(("diff ", "--- ", "+++ ")):
            return False
        return line[0] in " -+"
    return False


def recount(diff: str) -> str:
    """Rewrite every hunk header's line counts from the hunk's body.

    Hand-written and model-written diffs often carry wrong counts; git's
    `--recount` does the same. A blank line inside a hunk is taken as a blank
    context line (editors strip the leading space).
    """
    lines = _lf(diff).split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _HUNK_HEADER.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        body: list[str] = []
        i += 1
        while i < len(lines):
            line = lines[i]
            if _HUNK_HEADER.match(line) or line.startswith("diff "):
                break
            # `--- x` followed by `+++ y` starts the next file, not a removed line.
            if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
                break
            if line == "":
                if not _more_hunk_lines(lines, i):
                    break
                line = " "
            elif line[0] not in " -+\\":
                break
            body.append(line)
            i += 1
        old = sum(1 for b in body if b[0] in " -")
        new = sum(1 for b in body if b[0] in " +")
        old_start, new_start, tail = match.groups()
        # An empty side starts at the line before the hunk (0 for a new file).
        out.append(f"@@ -{old_start},{old} +{new_start},{new} @@{tail}")
        out.extend(body)
    return "\n".join(out)


def parse(diff: str) -> PatchSet:
    """Parse a unified diff; wrong hunk counts are repaired, not fatal.

    Raises NotADiff when the text holds no file diff at all.
    """
    if not isinstance(diff, str):
        raise NotADiff(f"expected diff text, got {type(diff).__name__}")
    text = _lf(diff)
    try:
        patchset = _patchset(text)
    except NotADiff as first:
        try:
            patchset = _patchset(recount(text))
        except NotADiff:
            raise first from None
    if len(patchset) == 0:
        excerpt = text.strip().splitlines()[0][:80] if text.strip() else "(empty text)"
        raise NotADiff(
            "not a unified diff: no '--- a/file' / '+++ b/file' headers or 'diff --git' lines "
            f"found (text starts with {excerpt!r})"
        )
    return patchset


def is_diff(text: str) -> bool:
    """Whether `text` parses as a unified diff touching at least one file."""
    try:
        parse(text)
    except NotADiff:
        return False
    return True


def repaired(diff: str) -> str:
    """The diff as given if it parses, else with its hunk counts recounted."""
    text = _lf(diff)
    try:
        _patchset(text)
    except NotADiff:
        return recount(text)
    return diff


def strip_prefix(path: str) -> str:
    """`a/x.py` → `x.py`; quotes removed; `/dev/null` kept as is."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        path = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        path = path.encode("latin-1", "replace").decode("utf-8", "replace")
    if path == DEV_NULL:
        return path
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


_NAME_LINES = ("rename from ", "rename to ", "copy from ", "copy to ")


def raw_paths(patched: PatchedFile) -> tuple[str, ...]:
    """Header paths of one file diff as written (prefixes kept), /dev/null left out.

    `rename from`/`copy to` lines count too: git apply acts on them.
    """
    paths = [p for p in (patched.source_file, patched.target_file) if p and p != DEV_NULL]
    for line in str(patched.patch_info).splitlines():
        for head in _NAME_LINES:
            if line.startswith(head):
                paths.append(line[len(head) :].strip())
    return tuple(paths)


def unsafe_paths(diff: str) -> tuple[tuple[str, str], ...]:
    """(path, why) for every path that would land outside the worktree or in `.git`."""
    found: dict[str, str] = {}
    for patched in parse(diff):
        for raw in raw_paths(patched):
            why = _unsafe(raw)
            if why:
                found.setdefault(raw, why)
    return tuple(sorted(found.items()))


def _unsafe(raw: str) -> str:
    path = strip_prefix(raw)
    if not path.strip():
        return "is empty"
    if raw.startswith(("/", "\\")) or path.startswith(("/", "\\")):
        return "is an absolute path"
    if re.match(r"^[A-Za-z]:", path):
        return "is an absolute path"
    parts = re.split(r"[/\\]", path)
    if ".." in parts:
        return "climbs out of the worktree with '..'"
    if any(part.lower() == ".git" for part in parts):
        return "writes into git's metadata (.git)"
    return ""


def file_paths(patched: PatchedFile) -> tuple[str, ...]:
    """Repo-relative paths one file diff touches (two for a rename)."""
    return tuple(dict.fromkeys(strip_prefix(p) for p in raw_paths(patched)))


def touched_files(diff: str) -> tuple[str, ...]:
    """Repo-relative paths the diff touches, both sides of renames, sorted."""
    return tuple(sorted({p for f in parse(diff) for p in file_paths(f)}))


def changed_lines(diff: str) -> int:
    """Added plus removed lines."""
    return sum(f.added + f.removed for f in parse(diff))


def exact_hash(diff: str) -> str:
    """sha256 of the diff text with CRLF line ends made LF."""
    return hashlib.sha256(_lf(diff).encode("utf-8", "surrogatepass")).hexdigest()


def canonical_line(text: str) -> str:
    """A line with whitespace collapsed: `x=1` and `x  =  1 ` are the same."""
    return " ".join(_TOKEN.findall(text))


def file_status(patched: PatchedFile) -> str:
    """ "added", "deleted", "renamed" or "modified", from the file's headers.

    Not unidiff's own flags: it also calls a file emptied to zero lines "removed".
    """
    source, target = (strip_prefix(p) for p in (patched.source_file, patched.target_file))
    info = str(patched.patch_info)
    if source == DEV_NULL or "\nnew file mode " in info:
        return "added"
    if target == DEV_NULL or "\ndeleted file mode " in info:
        return "deleted"
    return "renamed" if source != target else "modified"


def _status(patched: PatchedFile) -> str:
    paths = file_paths(patched)
    return f"{file_status(patched)} {' -> '.join(paths)}"


def _sort_key(patched: PatchedFile) -> tuple[str, str]:
    paths = file_paths(patched)
    return (paths[-1] if paths else "", paths[0] if paths else "")


def normalize(diff: str) -> str:
    """The change alone: per file (sorted by path) its status and its removed and
    added lines with whitespace collapsed; no context, hunk headers or index lines.

    Blank lines are left out: adding or dropping an empty line is whitespace.
    Binary files are named by the post-image blob id of their index line.
    """
    blocks: list[str] = []
    for patched in sorted(parse(diff), key=_sort_key):
        lines = [_status(patched)]
        if patched.is_binary_file:
            match = _INDEX_LINE.search(str(patched.patch_info))
            lines.append(f"binary {match.group(1) if match else '?'}")
        for hunk in patched:
            for line in hunk:
                if line.line_type not in "+-":
                    continue
                text = canonical_line(line.value)
                if text:
                    lines.append(f"{line.line_type}{text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def normalized_hash(diff: str) -> str:
    """sha256 of `normalize(diff)`: equal for the same change, whatever its context."""
    return hashlib.sha256(normalize(diff).encode("utf-8", "surrogatepass")).hexdigest()
