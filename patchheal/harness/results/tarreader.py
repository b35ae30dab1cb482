"""The bounded reader of a tar stream a step's container could have written.

A results directory that lives in a container (the Docker harness's results
tmpfs, a compose step's results volume) arrives as the engine's tar stream of
it. `read_tar` reads that stream as hostile input, under the same `Budget` and
per-file cap as `untrusted.py`'s directory and glob readers: only regular-file
members are read, every other kind (symlink, hard link, FIFO, device,
directory) is refused with its kind, and the stream itself is cut off past a
byte cap.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from patchheal.harness.results.untrusted import MAX_FILE_BYTES, MAX_FILES, Budget, Entry


@dataclass
class Archived:
    """One member of a tar stream: its path (first component dropped), its entry (read,
    refused, or not asked for: empty), and the bytes a regular file holds where it lives."""

    path: str
    entry: Entry
    size: int = 0


class _StreamTooBig(Exception):
    pass


class _Chunks(io.RawIOBase):
    """A file over an iterator of byte chunks that refuses to go past `cap` bytes."""

    def __init__(self, chunks: Iterable[bytes], cap: int) -> None:
        self._chunks = iter(chunks)
        self._view = memoryview(b"")
        self._cap = cap
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._view:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self.total += len(chunk)
            if self.total > self._cap:
                raise _StreamTooBig
            self._view = memoryview(chunk)
        n = min(len(buffer), len(self._view))
        buffer[:n] = self._view[:n]
        self._view = self._view[n:]
        return n


_TAR_KINDS = {
    tarfile.SYMTYPE: "a symlink",
    tarfile.LNKTYPE: "a hard link",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CHRTYPE: "a device",
    tarfile.BLKTYPE: "a device",
    tarfile.DIRTYPE: "a directory",
}


def read_tar(
    chunks: Iterable[bytes], budget: Budget, *, cap: int, wanted: Callable[[str], bool]
) -> tuple[list[Archived], str]:
    """The members of a tar stream, in stream order, and why the stream was cut short
    ('' when it was read to its end). A regular file whose path `wanted` names is read
    within `budget`; any other wanted member is refused with its kind; the rest are
    listed with an empty entry. Past `cap` bytes of stream nothing more is read."""
    source = _Chunks(chunks, cap)
    found: list[Archived] = []
    try:
        with tarfile.open(fileobj=io.BufferedReader(source), mode="r|") as tar:
            for member in tar:
                path = member.name.partition("/")[2]
                size = member.size if member.isreg() else 0
                if not (path and wanted(path)):
                    found.append(Archived(path, Entry(path), size))
                    continue
                found.append(Archived(path, _tar_entry(tar, member, path, budget), size))
    except _StreamTooBig:
        return found, f"the stream went past {cap} bytes"
    except (tarfile.TarError, OSError, EOFError) as exc:
        return found, f"an unreadable stream ({exc})"
    return found, ""


def _tar_entry(tar: tarfile.TarFile, member: tarfile.TarInfo, path: str, budget: Budget) -> Entry:
    if budget.files <= 0:
        return Entry(path, refused=f"more than {MAX_FILES} files")
    budget.files -= 1
    if not member.isreg():
        return Entry(path, refused=_TAR_KINDS.get(member.type, "not a regular file"))
    cap = min(MAX_FILE_BYTES, budget.bytes)
    if member.size > cap:
        return Entry(path, refused=f"over {cap} bytes")
    handle = tar.extractfile(member)
    data = handle.read(member.size) if handle is not None else b""
    budget.bytes -= len(data)
    return Entry(path, data=data)
