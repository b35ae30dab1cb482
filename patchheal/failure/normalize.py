"""Normalization: remove what changes from run to run without changing the bug.

Two layers. `clean` undoes terminal and CI decoration (ANSI colours, carriage
return redraws, per-line timestamps that CI runners prepend) so parsers see
the program's own lines. `normalize_message` turns a message into a template:
paths made repo-relative, temporary directories, timestamps, durations, hex
addresses, UUIDs, PIDs, ports, seeds, memory sizes, long numbers, the digits
inside quoted values and generated identifiers (`'bob-93'`, `user_42`, as
Sentry's grouping parameterizes them) and set/dict ordering replaced by stable
placeholders. Both run only on the failure's
excerpt, never on a whole log.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Timestamps a CI runner or a logger prepends to every line (GitHub Actions, GitLab, Jenkins).
_LINE_PREFIX = re.compile(
    r"^(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"|\[\d{2}:\d{2}:\d{2}(?:\.\d+)?\]) ?",
    re.MULTILINE,
)
_CI_MARKERS = re.compile(r"^##\[(?:group|endgroup|error|warning|debug)\]", re.MULTILINE)

_FROZEN = re.compile(r"^<[^>]*>$")
_LIBRARY = re.compile(
    r"(?:^|[/\\])(?:site-packages|dist-packages|node_modules|\.tox|__pypackages__)[/\\]"
)
_STDLIB = re.compile(
    r"(?:^|[/\\])(?:lib|Lib)[/\\](?:python\d(?:\.\d+)?[/\\])?(?!site-packages|dist-packages)"
    r"[^/\\]+(?:[/\\]|\.py$)|^/usr/lib/|^/usr/local/lib/(?!.*site-packages)"
    r"|^(?:node:|internal/|java\.|javax\.|jdk\.|sun\.|kotlin\.|org\.junit\.|junit\.)"
)
_TMP_PATH = re.compile(
    r"(?:/private)?(?:/tmp|/var/tmp|/var/folders/[^\s'\"]+?/T|/dev/shm|/run/user/\d+"
    r"|[A-Za-z]:\\(?:Users\\[^\\]+\\AppData\\Local\\)?Temp)"
    r"(?:[/\\][^\s'\":,;()\[\]{}<>]+)*?[/\\](?=[^/\\\s'\":,;()\[\]{}<>]+(?:[\s'\":,;()\[\]{}<>]|$))"
)
_TMP_NAME = re.compile(r"<tmp>/tmp[a-z0-9_]{8}\b")
_HOME = re.compile(r"(?:/home/[^/\s'\"]+|/Users/[^/\s'\"]+|/root)(?=/)")
_PY_VERSION_DIR = re.compile(r"python3\.\d+")
# patchheal's own collectors (mounted in a container, or the package's folder locally) wrap
# the runner, so their frames sit in a step's tracebacks: library code, not the project's.
_COLLECTORS = re.compile(
    r"^.*?(?:/opt/patchheal/collectors|[/\\]patchheal(?:[/\\]harness)?[/\\]collectors)[/\\]"
)
_LIB_PREFIX = re.compile(r"^.*?[/\\](site-packages|dist-packages|node_modules)[/\\]")
_STDLIB_PREFIX = re.compile(r"^.*?[/\\](?:lib|Lib)[/\\]python\d(?:\.\d+)?[/\\]")

# Applied in order; earlier ones protect their text from later, broader ones.
_SUBSTITUTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<ts>",
    ),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "0x<addr>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"(?i)\b(pid|process|thread|tid|worker)([ =:#]+)\d+"), r"\1\2<n>"),
    (re.compile(r"(?i)\b(seed|hashseed|random-seed|randomly-seed)([ =:]+)\d+"), r"\1\2<n>"),
    (
        re.compile(
            r"(?i)\b(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]|::1)([:, ]+(?:port )?)\d{2,5}\b"
        ),
        r"\1\2<port>",
    ),
    (re.compile(r"(?i)\bport([ =:]+)\d{2,5}\b"), r"port\1<port>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<ip>"),
    (re.compile(r"<ip>:\d{2,5}\b"), "<ip>:<port>"),
    (re.compile(r"(?i)\b\d+(?:\.\d+)?\s?(?:[KMGT]i?B|bytes|[kMG]B?)\b"), "<size>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds|min|minutes|h)\b"), "<dur>"),
    (re.compile(r"\bline \d+\b"), "line <n>"),
    (
        re.compile(r"\b\d+ (?=(?:Killed|Terminated|Aborted|Segmentation fault|Bus error)\b)"),
        "<pid> ",
    ),
    (re.compile(r"(\.\w{1,5}):\d+(?::\d+)?\b"), r"\1:<n>"),
    (re.compile(r"\b\d{7,}\b"), "<n>"),
)
# A quoted value without spaces (a key, a name, an id) whose digits vary with the data, not
# the bug: `KeyError: 'bob-93'` and `'bob-88'` are one bug. Quoted prose keeps its numbers.
_QUOTED_TOKEN = re.compile(r"(?<![\w\\])(['\"])([^\s'\"\\<>]{1,80})\1")
# A generated identifier: letters, then a separator, then 2+ digits (`user_42`, `job-1234`).
# Short or glued digits (`int64`, `sha256`, `py3`, `v2`) name different things and stay.
_GENERATED_ID = re.compile(r"\b([A-Za-z][A-Za-z]*[_-])\d{2,}\b")
_DIGITS = re.compile(r"\d{2,}")
# A flat set or dict literal of atoms, whose order depends on PYTHONHASHSEED.
_FLAT_COLLECTION = re.compile(r"\{((?:[^{}\[\]()\n]){1,2000})\}")
_ATOM = r"(?:'[^'\\]*'|\"[^\"\\]*\"|-?\d+(?:\.\d+)?|None|True|False)"
_SET_ITEMS = re.compile(rf"^{_ATOM}(?:, {_ATOM})*$")
_DICT_ITEMS = re.compile(rf"^{_ATOM}: {_ATOM}(?:, {_ATOM}: {_ATOM})*$")
_ITEM = re.compile(rf"{_ATOM}(?:: {_ATOM})?")


def clean(text: str) -> str:
    """Undo terminal and CI decoration: ANSI codes, `\\r` redraws, per-line timestamps."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:  # a progress bar redraw: keep what was drawn last
            text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    text = _LINE_PREFIX.sub("", text)
    return _CI_MARKERS.sub("", text)


def path_kind(path: str) -> str:
    """`project`, `library` (site-packages...), `stdlib`, or `frozen` (`<frozen x>`, `<string>`)."""
    if _FROZEN.match(path):
        return "frozen"
    if _LIBRARY.search(path) or _COLLECTORS.match(path):
        return "library"
    if _STDLIB.search(path):
        return "stdlib"
    return "project"


def relative_path(path: str, roots: Sequence[str] = ()) -> str:
    """A project path relative to the first root that contains it; others get a stable prefix."""
    path = path.replace("\\", "/") if "\\" in path and "/" not in path else path
    for root in roots:
        root = root.rstrip("/\\")
        if root and path.startswith(root + "/"):
            return path[len(root) + 1 :]
    kind = path_kind(path)
    if kind == "library" and _COLLECTORS.match(path):
        return _COLLECTORS.sub("<patchheal>/", path)
    if kind == "library":
        return _LIB_PREFIX.sub(lambda m: f"<{m.group(1)}>/", path)
    if kind == "stdlib":
        return _STDLIB_PREFIX.sub("<stdlib>/", path)
    if path.startswith("./"):
        return path[2:]
    return _TMP_PATH.sub("<tmp>/", path)


def normalize_message(text: str, roots: Sequence[str] = ()) -> str:
    """A message template: the same bug gives the same text on every run and machine."""
    for root in sorted((r.rstrip("/\\") for r in roots if r.strip("/\\")), key=len, reverse=True):
        text = text.replace(root + "/", "").replace(root, ".")
    text = _TMP_PATH.sub("<tmp>/", text)
    if "<tmp>/" in text:  # a temp dir's own random name (tempfile: tmp + 8 characters)
        text = _TMP_NAME.sub("<tmp>/tmpXXXXXXXX", text)
    text = _HOME.sub("~", text)
    text = _PY_VERSION_DIR.sub("python3.X", text)
    for pattern, replacement in _SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    text = _QUOTED_TOKEN.sub(_parameterize_quoted, text)
    text = _GENERATED_ID.sub(r"\1<n>", text)
    if "{" in text:
        text = _FLAT_COLLECTION.sub(_sort_collection, text)
    return text.strip()


def _parameterize_quoted(match: re.Match[str]) -> str:
    quote, value = match.group(1), match.group(2)
    if not _DIGITS.search(value) or not any(c.isalpha() for c in value):
        return match.group(0)  # a bare number or a plain word says what the bug is
    return f"{quote}{_DIGITS.sub('<n>', value)}{quote}"


def _sort_collection(match: re.Match[str]) -> str:
    inner = match.group(1)
    if not (_SET_ITEMS.match(inner) or _DICT_ITEMS.match(inner)):
        return match.group(0)  # not a flat literal of atoms: reordering could change meaning
    items = _ITEM.findall(inner)
    return "{" + ", ".join(sorted(items)) + "}"
