"""Failure intelligence: log → sections → parsers → scrub → normalize → fingerprint.

The fingerprint is the first 16 hex characters (64 bits) of a SHA-256 over:
the exception type, the message template (its first line, normalized), the
type and template of each chained cause, the in-project frames as file name +
function (directories and line numbers left out, so checkouts in other
directories and edits elsewhere in a file do not change it), and the failing
test ids in a canonical form (`tests/x.py::T::t` and JUnit's `tests.x.T.t` agree).
The parser that found the failure is not hashed.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from patchheal.errors import BadInput
from patchheal.failure.normalize import clean, normalize_message, path_kind, relative_path
from patchheal.failure.parsers import (
    ParsedFailure,
    RawException,
    RawFrame,
    airflow,
    dbt,
    generic,
    nodetest,
    pytest,
    sections,
    traceback,
    unittest,
)
from patchheal.failure.parsers import junit as junit_parser
from patchheal.models import Failure, Frame
from patchheal.scrub.active import scrub

FINGERPRINT_VERSION = "v1"
FINGERPRINT_LENGTH = 16
SIMILARITY_THRESHOLD = 0.75
SUMMARY_CHARS = 4000
MESSAGE_CHARS = 2000
_MAX_HASHED_FRAMES = 20
_MAX_HASHED_TESTS = 50
_SUGGESTION = re.compile(r"\.? Did you mean:? .*\?$")  # Python >= 3.10 suggestions vary by version
_GENERIC_NAMES = {"__init__.py", "__main__.py", "conftest.py", "index.js", "index.ts", "mod.rs"}


def analyze(
    log: str | bytes,
    *,
    repo_root: str | None = None,
    junit: str | bytes | None = None,
    command: str = "",
) -> Failure:
    """Fingerprint a captured log (and its JUnit report, if any). Never raises on content."""
    data = log.encode("utf-8", "replace") if isinstance(log, str) else log
    excerpt = sections.scan_bytes(data)
    return from_text(excerpt.text, repo_root=repo_root, junit=junit, command=command)


def read_log(path: Path | None) -> sections.Excerpt:
    """The failure-relevant excerpt of a log file (`None`: stdin), streamed in bounded memory.

    Raises BadInput for a file that cannot be read, is empty, or is not text.
    """
    name = "stdin" if path is None else str(path)
    try:
        if path is None:
            excerpt = sections.scan(sys.stdin.buffer)
        else:
            with path.open("rb") as stream:
                excerpt = sections.scan(stream)
    except OSError as exc:
        raise BadInput(f"cannot read the log {name}: {exc.strerror or exc}") from None
    if excerpt.binary:
        raise BadInput(f"the log {name} is binary data, not a text log")
    if excerpt.total_bytes == 0 or not excerpt.text.strip():
        raise BadInput(f"the log {name} is empty: there is no failure to fingerprint")
    return excerpt


def analyze_file(
    path: Path, *, junit_path: Path | None = None, repo_root: str | None = None
) -> Failure:
    """Fingerprint a log file of any size: only its failure-relevant sections are decoded."""
    excerpt = read_log(path)
    if junit_path is not None and not junit_path.is_file():
        raise BadInput(f"cannot read the JUnit report {junit_path}: no such file")
    return from_text(excerpt.text, repo_root=repo_root, junit=junit_path)


def from_text(
    text: str,
    *,
    repo_root: str | None = None,
    junit: str | bytes | Path | None = None,
    command: str = "",
) -> Failure:
    """Fingerprint an excerpt (or a small log): parse, scrub, normalize, hash."""
    text = clean(text)
    parsed = _best(text, command)
    if junit is not None:
        from_junit = junit_parser.parse(junit)
        if from_junit.found:
            from_junit.block = from_junit.block or parsed.block
            parsed = from_junit
    roots = _roots(parsed, repo_root)
    return _failure(parsed, roots)


def _best(text: str, command: str) -> ParsedFailure:
    candidates = []
    if "airflow " in command or any(marker in text for marker in airflow.MARKERS):
        candidates.append(airflow.parse(text))
    if "dbt " in command or any(marker in text for marker in dbt.MARKERS):
        candidates.append(dbt.parse(text))
    if "node --test" in command or all(marker in text for marker in nodetest.MARKERS):
        candidates.append(nodetest.parse(text))
    if "pytest" in command or any(marker in text for marker in pytest.MARKERS):
        candidates.append(pytest.parse(text))
    if any(marker in text for marker in unittest.MARKERS):
        candidates.append(unittest.parse(text))
    if traceback.START in text or 'File "' in text:
        candidates.append(traceback.parse(text))
    for parsed in candidates:
        if parsed.found:
            return parsed
    return generic.parse(text)


def _roots(parsed: ParsedFailure, repo_root: str | None) -> list[str]:
    roots = [r for r in (repo_root, parsed.rootdir) if r]
    if repo_root:
        roots.append(os.path.realpath(repo_root))
    absolute = [
        f.file
        for f in _all_frames(parsed)
        if f.file.startswith("/")
        and path_kind(f.file) == "project"
        and not any(f.file.startswith(r.rstrip("/") + "/") for r in roots)
    ]
    if absolute:
        # No root given for these: the parent of their common directory stands in for it,
        # keeping the package folder (`app/x.py`) that tells a project import from a missing one.
        common = os.path.commonpath([str(Path(p).parent) for p in absolute])
        roots.append(str(Path(common).parent))
    return roots


def _all_frames(parsed: ParsedFailure) -> list[RawFrame]:
    return [f for exc in parsed.chain for f in exc.frames] + parsed.frames


def _template(message: str, roots: Sequence[str]) -> str:
    lines = [line for line in scrub(message).split("\n") if line.strip()]
    first = _SUGGESTION.sub("", lines[0].strip()) if lines else ""
    return normalize_message(first, roots)


def _frame(raw: RawFrame, roots: Sequence[str]) -> Frame:
    return Frame(
        file=relative_path(raw.file, roots),
        function=raw.function,
        line=raw.line,
        in_project=path_kind(raw.file) == "project",
    )


def hash_path(file: str) -> str:
    """The part of a path that is hashed: the file name (with its folder for generic names)."""
    parts = file.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:]) if parts[-1] in _GENERIC_NAMES else parts[-1]


def canonical_test_id(test_id: str) -> str:
    """`tests/x.py::T::t[a]`, `tests.x.T.t[a]` and `t (tests.x.T.t)` all become `tests.x.T.t[a]`."""
    name, bracket, params = test_id.partition("[")
    name = re.sub(r"\.py(?=::|$)", "", name).replace("::", ".").replace("/", ".").strip(".")
    return name + bracket + params


def _failure(parsed: ParsedFailure, roots: Sequence[str]) -> Failure:
    frames = tuple(_frame(raw, roots) for raw in parsed.frames)
    parts = [FINGERPRINT_VERSION, f"type={parsed.error_type}"]
    parts.append(f"msg={_template(parsed.message, roots)}")
    parts += [f"cause={c.error_type}:{_template(c.message, roots)}" for c in parsed.chain]
    hashed_frames: list[str] = []
    for exc in [*parsed.chain, RawException(parsed.error_type, parsed.message, parsed.frames)]:
        for raw in exc.frames:
            if path_kind(raw.file) == "project":
                key = f"frame={hash_path(relative_path(raw.file, roots))}:{raw.function}"
                if not hashed_frames or hashed_frames[-1] != key:  # recursion depth varies
                    hashed_frames.append(key)
    parts += hashed_frames[-_MAX_HASHED_FRAMES:]
    tests = sorted({canonical_test_id(normalize_message(t, roots)) for t in parsed.failing_tests})
    parts += [f"test={t}" for t in tests[:_MAX_HASHED_TESTS]]
    digest = hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()
    message = normalize_message(scrub(parsed.message), roots)[:MESSAGE_CHARS]
    summary = normalize_message(scrub(parsed.block), roots)[-SUMMARY_CHARS:]
    return Failure(
        fingerprint=digest[:FINGERPRINT_LENGTH],
        error_type=parsed.error_type,
        message=message,
        summary=summary,
        frames=frames,
        failing_tests=tuple(normalize_message(t, roots) for t in parsed.failing_tests),
        source=parsed.source,
    )


def _tokens(failure: Failure) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", f"{failure.error_type} {failure.message}")[:200]


def similarity(a: Failure, b: Failure) -> float:
    """0..1: how alike two failures are (type, message template, in-project frames)."""
    if a.fingerprint == b.fingerprint:
        return 1.0
    text = difflib.SequenceMatcher(None, _tokens(a), _tokens(b), autojunk=False).ratio()
    same_type = 1.0 if a.error_type == b.error_type else 0.0
    frames_a = {(hash_path(f.file), f.function) for f in a.project_frames}
    frames_b = {(hash_path(f.file), f.function) for f in b.project_frames}
    if not frames_a and not frames_b:
        return round(0.35 * same_type + 0.65 * text, 4)
    files_a, files_b = {f for f, _ in frames_a}, {f for f, _ in frames_b}
    # Same functions count fully, the same files half: a bug next door is still similar.
    frames = 0.5 * len(frames_a & frames_b) / len(frames_a | frames_b) + 0.5 * len(
        files_a & files_b
    ) / len(files_a | files_b)
    return round(0.25 * same_type + 0.45 * text + 0.30 * frames, 4)
