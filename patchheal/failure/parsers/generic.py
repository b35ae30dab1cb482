"""Any other log: compiler/linter lines (`file:line: error: ...`), stack frames of other
languages, and otherwise the error block near the end."""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure, RawException, RawFrame

# gcc/clang/javac/mypy `f:12:3: error: m`, tsc `f(12,3): error TS2322: m`, lint `f:1:8: F401 m`.
_COMPILER = re.compile(
    r"^(?P<file>[^\s:()]+\.[A-Za-z]\w{0,5})(?::(?P<line>\d+)(?::\d+)?:|\((?P<tline>\d+),\d+\):)\s*"
    r"(?:(?:fatal )?(?P<kind>error)(?: (?P<tscode>TS\d+))?:?\s*|(?P<lint>[A-Z]{1,4}\d{2,5})\b\s*)"
    r"(?P<msg>.*?)(?:\s+\[(?P<code>[\w-]+)\])?\s*$",
    re.MULTILINE,
)
# rustc: `error[E0308]: mismatched types` then `  --> src/main.rs:4:5`
_RUST = re.compile(
    r"^error\[(?P<code>E\d+)\]: (?P<msg>.*)\n\s*--> (?P<file>[^:\s]+):(?P<line>\d+)", re.MULTILINE
)
_JAVA_FRAME = re.compile(
    r"^\s+at (?P<func>[\w$.<>/]+)\((?P<file>[^:)]+)(?::(?P<line>\d+))?\)", re.MULTILINE
)
_JS_FRAME = re.compile(
    r"^\s+at (?:(?P<func>[^\s(][^(]*?) \()?(?P<file>[^\s()]+?):(?P<line>\d+):\d+\)?$", re.MULTILINE
)
_ERRORISH = re.compile(
    r"(?i)\b(?:error|fatal|failed|failure|exception|panic|killed|denied|refused|timed out"
    r"|cannot|unable to|not found|no such|violat\w*|exit (?:code|status))\b|ERR!"
)
# Wrappers that only say "the step failed": evidence, but not the headline.
_WRAPPER = re.compile(
    r"(?i)process completed with exit code|^make(?:\[\d+\])?: \*\*\*|job failed: exit code"
    r"|^error: script returned exit code|^npm ERR! (?:A complete log|\s*$)|command exited with"
)
_TYPE_IN_LINE = re.compile(r"\b(?P<type>[A-Z][\w.]*(?:Error|Exception|Exit))\b(?::\s?(?P<msg>.*))?")
_NPM_CODE = re.compile(r"npm ERR! code (\w+)")
TAIL_LINES = 300
MARKERS = (
    ": error",
    "error:",
    "error[",
    "Error:",
    "ERROR",
    "FATAL",
    "fatal:",
    "panic:",
    "npm ERR!",
)


def stack_frames(text: str) -> list[RawFrame]:
    """Java and JavaScript stack frames, innermost last (as Python prints them)."""
    java = [RawFrame(m["file"], m["func"], int(m["line"]) if m["line"] else None)
            for m in _JAVA_FRAME.finditer(text)]  # fmt: skip
    if java:
        return java[::-1]
    js = [RawFrame(m["file"], (m["func"] or "").strip(), int(m["line"]))
          for m in _JS_FRAME.finditer(text)]  # fmt: skip
    return js[::-1]


def compiler_errors(text: str) -> list[tuple[str, str, RawFrame]]:
    """(code, message, location) of each compiler or linter diagnostic, in order."""
    found = []
    for m in _COMPILER.finditer(text):
        line = m["line"] or m["tline"]
        code = m["code"] or m["tscode"] or m["lint"] or "error"
        found.append((code, m["msg"].strip(), RawFrame(m["file"], "", int(line))))
    for m in _RUST.finditer(text):
        found.append((m["code"], m["msg"].strip(), RawFrame(m["file"], "", int(m["line"]))))
    return found


def parse(text: str) -> ParsedFailure:
    """Compiler diagnostics if any; else the headline of the last error block of the tail."""
    diagnostics = compiler_errors(text)
    if diagnostics:
        code, message, frame = diagnostics[0]
        return ParsedFailure(
            source="compiler",
            error_type=code,
            message=message,
            frames=[frame],
            chain=[RawException(c, m, [f]) for c, m, f in diagnostics[1:50]],
            block="\n".join(f"{f.file}:{f.line}: {c}: {m}" for c, m, f in diagnostics[:50]),
        )
    lines = [line.rstrip() for line in text.split("\n")[-TAIL_LINES:]]
    hits = [n for n, line in enumerate(lines) if _ERRORISH.search(line)]
    strong = [n for n in hits if not _WRAPPER.search(lines[n])] or hits
    if not strong:
        tail = [line for line in lines if line.strip()][-5:]
        return ParsedFailure(source="generic", message=tail[-1].strip() if tail else "",
                             block="\n".join(tail))  # fmt: skip
    first = strong[-1]
    while strong.index(first) > 0 and first - strong[strong.index(first) - 1] <= 3:
        first = strong[strong.index(first) - 1]  # walk up to the start of the block
    headline = lines[first].strip()
    error_type, message = "error", headline
    if npm := _NPM_CODE.search("\n".join(lines[first:])):
        error_type = npm.group(1)
    elif typed := _TYPE_IN_LINE.search(headline):
        error_type, message = typed["type"], typed["msg"] or headline
    elif headline.lower().startswith(("fatal", "panic", "killed")):
        error_type = headline.split(":", 1)[0].split()[0].lower()
    block = "\n".join(lines[max(0, first - 3) : strong[-1] + 4])
    return ParsedFailure(
        source="generic",
        error_type=error_type,
        message=message,
        frames=stack_frames(block),
        block=block,
    )
