"""The scrubber masks disguised forms of a job's secrets (issue 25, item 8).

Exact values had 0 hits in 93 written files, but reversed, halved and spaced-out
forms of job secrets were stored, and a host private key reached the reports as
decimal byte codes. Property-style: many generated secrets, every form, embedded in
ordinary text; and the same scrubber leaves ordinary text alone.
"""

from __future__ import annotations

import random
import string
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.scrub import variants
from patchheal.scrub.scrubber import MASK, Scrubber

REAL_HUNKS = Path(__file__).parent / "data" / "real_hunks_not_secrets.txt"
ALPHABETS = (
    string.ascii_letters + string.digits,
    string.hexdigits[:16],
    string.ascii_letters + string.digits + "+/=",
    string.ascii_letters + string.digits + "-_.!@#$%^&*",
)


def _secrets(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    found: list[str] = []
    while len(found) < count:
        alphabet = rng.choice(ALPHABETS)
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(16, 64)))
        # A value repeating a few characters is not a secret; nor is a half of one that does
        # (variants.MIN_HALF_DISTINCT: such a half is left alone, as ordinary text is).
        halves = (value[: len(value) // 2], value[len(value) // 2 :])
        if len(set(value)) >= 8 and all(
            len(set(half)) >= variants.MIN_HALF_DISTINCT for half in halves
        ):
            found.append(value)
    return found


def _seed(form: str) -> int:
    """The same secrets on every run (`hash()` of a str changes with each process)."""
    return zlib.crc32(form.encode()) % 1000


def _spaced(sep: str) -> Callable[[str], str]:
    return lambda value: sep.join(value)


FORMS: dict[str, Callable[[str], str]] = {
    "reversed": lambda v: v[::-1],
    "first half": lambda v: v[: len(v) // 2],
    "second half": lambda v: v[len(v) // 2 :],
    "spaced": _spaced(" "),
    "dashed": _spaced("-"),
    "dotted reversed": lambda v: ".".join(v[::-1]),
    "char list": lambda v: str(list(v)),
    "decimal codes": lambda v: str(list(v.encode())),
    "decimal spaced": lambda v: " ".join(str(b) for b in v.encode()),
    "hex": lambda v: v.encode().hex(),
    "hex spaced": lambda v: v.encode().hex(" "),
    "hex 0x": lambda v: ", ".join(f"0x{b:02X}" for b in v.encode()),
    "hex escapes": lambda v: "".join(f"\\x{b:02x}" for b in v.encode()),
    "percent": lambda v: "".join(f"%{b:02X}" for b in v.encode()),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_disguised_form_of_a_job_secret_is_masked(form: str) -> None:
    """For 150 generated secrets, the form (inside a log line) is gone after scrubbing."""
    secrets = _secrets(100, seed=_seed(form))
    scrubber = Scrubber(secrets)
    for secret in secrets:
        shown = FORMS[form](secret)
        line = f"step output: leaked={shown} (done)\n"
        scrubbed = scrubber.scrub(line)
        assert shown not in scrubbed, (form, secret, scrubbed)
        assert MASK in scrubbed


def test_a_private_key_printed_as_decimal_codes_is_masked_without_job_secrets() -> None:
    """H1: a host key's bytes reached output, events, store and reports as decimal codes;
    the decoded text is a known format, so the default rules catch every code form."""
    key = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    scrubber = Scrubber()
    for form in ("decimal codes", "decimal spaced", "hex spaced", "hex 0x", "hex escapes"):
        shown = FORMS[form](key)
        scrubbed = scrubber.scrub(f"data: {shown}\n")
        assert scrubbed.replace(MASK, "").strip("[]\n") == "data: ", (form, scrubbed)


def test_ordinary_text_is_not_over_scrubbed() -> None:
    """With 300 generated secrets, real diff hunks, rows of numbers, hex dumps of ordinary
    bytes and spaced-out prose come out unchanged."""
    scrubber = Scrubber(_secrets(300, seed=7))
    ordinary = [
        REAL_HUNKS.read_text(),
        "collected 1 2 3 4 5 6 7 8 9 10 11 12 items; ports 8080, 8081, 8082, 8083, 8084\n",
        str(list(b"Hello, world! This is plain text.")) + "\n",
        "de ad be ef ca fe ba be 00 11 22 33 44 55\n",
        "\\x48\\x65\\x6c\\x6c\\x6f\\x20\\x77\\x6f\\x72\\x6c\\x64\n",
        "T H I S   I S   A   B A N N E R  -  s - p - a - c - e - d\n",
        "commit 3b705bd6f0e8d0b7c4a2e1f9a8b7c6d5e4f3a2b1 and 0x7f 0x45 0x4c 0x46\n",
    ]
    for text in ordinary:
        assert scrubber.scrub(text) == text


def test_short_or_repetitive_halves_are_not_masked() -> None:
    """The minimum: a half is masked only with MIN_HALF_LENGTH (8) characters and
    MIN_HALF_DISTINCT (5) distinct ones; variants of values under MIN_VARIANT_LENGTH (8)
    are not made at all (`password` would otherwise mask `pass` and `word`)."""
    assert variants.MIN_HALF_LENGTH == 8
    scrubber = Scrubber(["passwordpass", "aaaaaaaabbbbbbbb", "Zq8vLw2pXk4nRt7y"])
    text = "the word pass, aaaaaaaa and bbbbbbbb stay; Zq8vLw2p goes"
    assert scrubber.scrub(text) == f"the word pass, aaaaaaaa and bbbbbbbb stay; {MASK} goes"


def test_scrubbing_disguised_forms_is_a_fixed_point() -> None:
    secrets = _secrets(20, seed=3)
    scrubber = Scrubber(secrets)
    text = "\n".join(FORMS[form](s) for s in secrets for form in sorted(FORMS))
    once = scrubber.scrub(text)
    assert scrubber.scrub(once) == once
