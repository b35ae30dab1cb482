"""Python tracebacks, chained ones too (`During handling...`, `The above exception...`)."""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure, RawException, RawFrame

START = "Traceback (most recent call last):"
_CHAIN_SEPARATORS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+?))?\s*$')
# `pkg.module.Error: message` or a bare `Error`; a source line is indented, this is not.
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::(?: (?P<msg>.*))?)?$")
_GROUP_PREFIX = re.compile(r"^(\s*[|+]-*\s?)+")  # exception-group drawing: `  | `, `  +-+---`
_MAX_MESSAGE_LINES = 20
# A module that does not compile prints no `Traceback` header, only its location.
_SYNTAX = re.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)\n(?:.*\n){0,4}?'
    r"(?P<type>SyntaxError|IndentationError|TabError): (?P<msg>.*)$",
    re.MULTILINE,
)


def parse_chains(text: str) -> list[list[RawException]]:
    """Every traceback chain in `text`, in order; each chain lists its exceptions root first."""
    lines = text.split("\n")
    chains: list[list[RawException]] = []
    current: list[RawException] = []
    i = 0
    while i < len(lines):
        line = _strip_group(lines[i])
        if not line.rstrip().endswith(START):
            i += 1
            continue
        exc, i = _parse_one(lines, i + 1, base=line[: line.index(START)])
        if exc is None:
            continue
        current.append(exc)
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and _strip_group(lines[j]).strip() in _CHAIN_SEPARATORS:
            i = j + 1
            continue
        chains.append(current)
        current = []
    if current:
        chains.append(current)
    return chains


def _strip_group(line: str) -> str:
    return _GROUP_PREFIX.sub("", line) if "|" in line[:12] or "+-" in line[:12] else line


def _parse_one(lines: list[str], i: int, *, base: str) -> tuple[RawException | None, int]:
    """Parse frames and the exception line after a `Traceback` header at lines[i-1]."""
    prefix_len = len(base)
    frames: list[RawFrame] = []
    while i < len(lines):
        raw = _strip_group(lines[i])
        line = raw[prefix_len:] if raw.startswith(base) else raw
        frame = _FRAME.match(line)
        if frame:
            frames.append(
                RawFrame(frame["file"], (frame["func"] or "").strip(), int(frame["line"]))
            )
            i += 1
            continue
        if not line.strip() or line[:1] in (" ", "\t"):
            i += 1  # source lines, caret lines, "[Previous line repeated N more times]"
            continue
        match = _EXCEPTION.match(line.rstrip())
        if match is None:
            return None, i + 1
        message = [match["msg"] or ""]
        i += 1
        while i < len(lines) and len(message) < _MAX_MESSAGE_LINES:
            nxt = _strip_group(lines[i])
            nxt = nxt[prefix_len:] if nxt.startswith(base) else nxt
            if not nxt.strip() or nxt.strip() in _CHAIN_SEPARATORS or nxt.endswith(START):
                break
            message.append(nxt.rstrip())
            i += 1
        return RawException(match["type"], "\n".join(message).strip(), frames), i
    return None, i


def parse(text: str) -> ParsedFailure:
    """The last traceback chain of `text` as a failure: its final exception is the primary."""
    chains = parse_chains(text)
    if not chains:
        matches = list(_SYNTAX.finditer(text))
        if not matches:
            return ParsedFailure(source="traceback")
        syntax = matches[-1]
        frame = RawFrame(syntax["file"], "", int(syntax["line"]))
        return ParsedFailure(
            source="traceback",
            error_type=syntax["type"],
            message=syntax["msg"].strip(),
            frames=[frame],
            block=syntax.group(0),
        )
    chain = chains[-1]
    primary = chain[-1]
    start = len(text)
    for _ in chain:  # the block starts at the chain's first traceback
        start = max(0, text.rfind(START, 0, start))
    return ParsedFailure(
        source="traceback",
        error_type=primary.error_type,
        message=primary.message,
        frames=primary.frames,
        chain=chain[:-1],
        block=text[start:][-8000:],
    )
