"""What the impossible twin tells the step's collector, in a blob alike in every run.

Each run of a results channel gets `PATCHHEAL_TWIN` (`ResultsChannel.environment`):
a nonce and a JSON payload padded to `SIZE` bytes, XORed with the nonce's SHAKE-256
keystream, in base64, so the twin's blob and every other run's have the same
length and look alike (random). It is opaque, not secret: what keeps it from the
step is what keeps the signing token from it (the collector takes it out of
`os.environ` and the process's environment block before project code runs, and
the tripwire reports reads of `/proc/*/environ`). The twin's payload (the files
and changes `loop/twins.py` planned) is carried only while `carrying` is open,
around the twin's own run; every other run gets an empty one.

Every run of the failing step in a verification, the twin's and the others alike,
also names the test files whose passing assertions the verdict needs seen
(`wanting`): pytest explains a passing assert (the `repr` of its operands) only
when a plugin asks to be told of it, and that costs what a failure's explanation
costs, on every passing assert of the suite (an exception group of shared leaves
25 deep: 0.08 s plainly, past a 20 s timeout explained). So the pytest collector asks
only inside the tests of those files (collectors/patchheal_pytest.py); a run that
wants none (the reproduction, a regression step) has it asked nowhere.

The blob also tells the monitor whose code reads to watch (`reads`): a test's code
read for the project's code tells the twin apart, so the runs beside a twin (the
verification's failing step, `wanting`) watch reads of the named files; the
reproduction's runs of the failing step, which the verdict compares those with,
watch every test file's (a superset: what a file did at verification it did there
too); a regression step (`no_twin`), which no twin is ever run beside, watches none.
Reading code is the commonest audited operation (click's suite: 62,000 reads), and
watching it everywhere cost a clean suite 7 % (benchmarks/README.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

ENV = "PATCHHEAL_TWIN"
SIZE = 16384
"""The payload's padded size, in every run: a twin whose changes do not fit is not made
(its tests are named as having no twin)."""
_NONCE = 16
_CARRIED: ContextVar[bytes] = ContextVar("patchheal_twin_payload", default=b"")
_WANTED: ContextVar[tuple[str, ...]] = ContextVar("patchheal_evidence_files", default=())
READS_ALL, READS_NAMED, READS_NONE = "all", "named", "none"
_READS: ContextVar[str] = ContextVar("patchheal_reads_watched", default=READS_ALL)


class TooLarge(ValueError):
    """The payload does not fit in `SIZE` bytes."""


def payload(files: Sequence[Mapping[str, object]]) -> bytes:
    """The JSON of the twin's files and the test files wanted (`wanting`); raises
    `TooLarge` when it does not fit."""
    told = {"files": list(files), "evidence": list(_WANTED.get()), "reads": _READS.get()}
    data = json.dumps(told, separators=(",", ":")).encode()
    if len(data) > SIZE:
        raise TooLarge(f"{len(data)} bytes of changes (at most {SIZE})")
    return data


def encode(data: bytes) -> str:
    """The blob of `data` (padded to `SIZE`), as `collectors/patchheal_twin.py` decodes it."""
    if len(data) > SIZE:
        raise TooLarge(f"{len(data)} bytes of changes (at most {SIZE})")
    plain = data + b" " * (SIZE - len(data))
    nonce = secrets.token_bytes(_NONCE)
    stream = hashlib.shake_256(nonce).digest(SIZE)
    body = (int.from_bytes(plain, "big") ^ int.from_bytes(stream, "big")).to_bytes(SIZE, "big")
    return base64.b64encode(nonce + body).decode("ascii")


def blob() -> str:
    """The blob for the run about to start: the twin's payload inside `carrying`, else none."""
    return encode(_CARRIED.get() or payload([]))


@contextmanager
def wanting(files: Sequence[str]) -> Iterator[None]:
    """Runs started inside (and payloads made inside) name `files` as the test files whose
    passing assertions must be seen (relative paths, as pytest's node ids start), and
    whose code the monitor watches being read."""
    token = _WANTED.set(tuple(dict.fromkeys(files)))
    reads = _READS.set(READS_NAMED)
    try:
        yield
    finally:
        _READS.reset(reads)
        _WANTED.reset(token)


@contextmanager
def no_twin() -> Iterator[None]:
    """Runs started inside are ones no twin is ever run beside (a regression step, at base
    and in a verification alike): the monitor watches no test's code being read there."""
    token = _READS.set(READS_NONE)
    try:
        yield
    finally:
        _READS.reset(token)


@contextmanager
def carrying(data: bytes) -> Iterator[None]:
    """Runs started inside get `data` (from `payload`) in their blob."""
    token = _CARRIED.set(data)
    try:
        yield
    finally:
        _CARRIED.reset(token)
