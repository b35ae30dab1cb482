"""Find the failure-relevant sections of a log, in one streaming pass, in bounded memory.

Regexes over a whole CI log run near 7 MB/s; byte searches run at GB/s. So a log
is read in chunks, every chunk is searched once for a set of markers (an
Aho-Corasick automaton when `ahocorasick_rs` is installed, `bytes.find` per
marker otherwise), and only a window around each hit, plus the tail of the log,
is kept and decoded for the parsers. Windows beyond a byte budget drop the
oldest first: the failure that ended a job is near its end.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 4 * 1024 * 1024
TAIL = 256 * 1024
WINDOW_BUDGET = 4 * 1024 * 1024
MAX_WINDOW = 1024 * 1024
SAMPLE = 64 * 1024
SKIPPED = "\n[...]\n"  # between non-adjacent sections; fixed text, so fingerprints stay stable

# marker -> (bytes kept before the hit, bytes kept after it)
MARKERS: dict[bytes, tuple[int, int]] = {
    b"Traceback (most recent call last):": (256, 64 * 1024),
    b"= FAILURES =": (256, MAX_WINDOW),
    b"= ERRORS =": (256, MAX_WINDOW),
    b"Completed with ": (256, 32 * 1024),  # dbt's summary of failing nodes
    b"Task failed with exception": (512, 64 * 1024),  # Airflow's failed task, its traceback
    b"Failed to import: ": (512, 32 * 1024),  # Airflow: a DAG file that does not parse
    b"short test summary info": (256, 64 * 1024),
    b"\nFAIL: ": (256, 32 * 1024),
    b"\nERROR: ": (256, 32 * 1024),
    b": error": (512, 4096),
    b"error:": (512, 4096),
    b"error[": (512, 4096),
    b"Error:": (512, 4096),
    b"ERROR": (512, 2048),
    b"FATAL": (512, 2048),
    b"fatal:": (512, 2048),
    b"panic:": (512, 8192),
    b"npm ERR!": (512, 4096),
    b"Killed": (512, 1024),
    b"No space left": (512, 1024),
    b"ut of memory": (512, 1024),
    b"OOMKilled": (512, 1024),
}
_MAX_BEFORE = max(before for before, _ in MARKERS.values())
_OVERLAP = max(len(marker) for marker in MARKERS) - 1


@dataclass(frozen=True)
class Excerpt:
    """The failure-relevant text of a log, and what was seen on the way."""

    text: str
    total_bytes: int
    binary: bool = False
    dropped_windows: int = 0


class _Window:
    __slots__ = ("data", "end", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end, self.data = start, end, bytearray()

    def fill(self, buf: memoryview, buf_start: int) -> None:
        have = self.start + len(self.data)
        lo, hi = max(have, buf_start), min(self.end, buf_start + len(buf))
        if lo == have and hi > lo:
            self.data += buf[lo - buf_start : hi - buf_start]


def _make_search() -> Callable[[memoryview], list[tuple[int, int]]]:
    patterns = list(MARKERS)
    try:
        import ahocorasick_rs
    except ImportError:  # the fallback: one C-speed find per marker

        def search(buf: memoryview) -> list[tuple[int, int]]:
            data = buf.tobytes()
            hits = []
            for n, marker in enumerate(patterns):
                pos = data.find(marker)
                while pos >= 0:
                    hits.append((pos, n))
                    pos = data.find(marker, pos + len(marker))
            hits.sort()
            return hits

        return search
    # Leftmost-first lets the automaton use its SIMD prefilter: ~15 GB/s here against
    # ~0.6 GB/s for the standard match kind, with the same hits on CI logs.
    automaton = ahocorasick_rs.BytesAhoCorasick(
        patterns, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
    )

    def search_ac(buf: memoryview) -> list[tuple[int, int]]:
        return [(start, n) for n, start, _ in automaton.find_matches_as_indexes(buf)]

    return search_ac


_search = _make_search()
_SPANS = list(MARKERS.values())
_MARKER_LIST = list(MARKERS)


def looks_binary(sample: bytes) -> bool:
    """NUL bytes, many control characters or much invalid UTF-8: not a text log."""
    if not sample:
        return False
    limit = len(sample) // 20
    controls = sum(sample.count(bytes([c])) for c in range(32) if c not in (8, 9, 10, 12, 13, 27))
    invalid = sample.decode("utf-8", "replace").count("\ufffd")
    return sample.count(0) > len(sample) // 1000 or controls > limit or invalid > limit


def scan(stream: BinaryIO, *, chunk_size: int = CHUNK) -> Excerpt:
    """Read `stream` to the end, keeping only windows around markers and the tail."""
    windows: deque[_Window] = deque()
    planned = dropped = offset = 0
    prev = b""
    sample = b""
    tail = b""
    while chunk := stream.read(chunk_size):
        if not sample:
            sample = chunk[:SAMPLE]
            if looks_binary(sample):  # no need to read on: say so at once
                return Excerpt("", len(chunk), binary=True)
        base, buf_bytes = offset, prev + chunk
        buf, buf_start = memoryview(buf_bytes), offset - len(prev)
        for window in windows:
            if window.end > base:
                window.fill(buf, buf_start)
        skip = max(0, len(prev) - _OVERLAP)
        for pos, n in _search(buf[skip:]):
            hit = buf_start + skip + pos
            if hit < base - _OVERLAP or hit + len(_MARKER_LIST[n]) <= base:
                continue  # already found in the previous chunk
            before, after = _SPANS[n]
            start, end = max(0, hit - before, buf_start), hit + after
            last = windows[-1] if windows else None
            if last is not None and start <= last.end and end - last.start <= MAX_WINDOW:
                if end > last.end:
                    planned += end - last.end
                    last.end = end
                    last.fill(buf, buf_start)
                continue
            if last is not None and start < last.end:
                if end <= last.end:
                    continue
                start = last.end
            window = _Window(start, end)
            window.fill(buf, buf_start)
            windows.append(window)
            planned += end - start
            while planned > WINDOW_BUDGET and len(windows) > 1:
                old = windows.popleft()
                planned -= old.end - old.start
                dropped += 1
        offset += len(chunk)
        tail = buf_bytes[-TAIL:]
        prev = buf_bytes[-_MAX_BEFORE:]
    return Excerpt(_assemble(windows, tail, offset), offset, dropped_windows=dropped)


def scan_bytes(data: bytes) -> Excerpt:
    return scan(io.BytesIO(data))


def _assemble(windows: deque[_Window], tail: bytes, total: int) -> str:
    segments: list[tuple[int, bytes]] = [(w.start, bytes(w.data)) for w in windows if w.data]
    segments.append((total - len(tail), tail))
    segments.sort(key=lambda seg: seg[0])
    merged: list[tuple[int, bytearray]] = []
    for start, data in segments:
        if merged and start <= merged[-1][0] + len(merged[-1][1]):
            m_start, m_data = merged[-1]
            overlap = m_start + len(m_data) - start
            m_data += data[overlap:]
        else:
            merged.append((start, bytearray(data)))
    texts = []
    for start, whole in merged:
        data, end = bytes(whole), start + len(whole)
        if start > 0:  # drop the partial first line
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
        if end < total:  # and the partial last one
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else b""
        if data:
            texts.append(data.decode("utf-8", "replace"))
    return SKIPPED.join(texts)
