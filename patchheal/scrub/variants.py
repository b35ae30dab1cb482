"""Disguised forms of secrets: what a step can print instead of the value itself.

Measured (issue 25): exact job secret values had 0 hits in 93 written files, but
reversed, halved and spaced-out forms were stored, and a host private key reached
the reports written as decimal byte codes. So the scrubber also masks:

- for each job secret value of at least MIN_VARIANT_LENGTH characters: the value
  reversed; its hex (`bytes.hex()`, both cases) and base64 (standard and URL-safe,
  unpadded); the value spaced out, forwards or reversed (its characters separated
  by one to four characters that are neither letters nor digits: `s e c r e t`,
  `s-e-c-r-e-t`, `['s', 'e', 'c']`);
- each half of a job secret value (split at the middle, both ways for an odd
  length) when the half has at least MIN_HALF_LENGTH characters and
  MIN_HALF_DISTINCT distinct ones (shorter or repetitive halves match ordinary
  text: `password` halves into `pass` and `word`);
- any run of at least MIN_CODE_RUN byte codes (decimal `45, 45, 66`, hex
  `0x2d 0x2d`, `\\x2d\\x2d`, `%2d%2d`, `2d:2d:2d`) whose decoded bytes the
  scrubber would mask: a job secret, or a known format such as a private key.

The thresholds were checked against tests/data/real_hunks_not_secrets.txt and the
property tests in tests/test_scrub_variants.py (thousands of generated secrets).
"""

from __future__ import annotations

import base64
import re
import string
from collections.abc import Callable, Iterable

MIN_VARIANT_LENGTH = 8
MIN_HALF_LENGTH = 8
MIN_HALF_DISTINCT = 5
MIN_CODE_RUN = 8
# Between spaced-out characters: 1-4 characters that are neither letters nor digits.
_SEP = r"[^A-Za-z0-9\n]{1,4}"
# Each pattern starts with a character class, never a lookbehind, so the regex engine
# skips ahead to candidate characters instead of trying every position (3-5x faster on
# ordinary text); word boundaries are checked on the (rare) matches instead.
_DEC_RUN = re.compile(
    rf"[0-9]{{1,3}}(?:(?:[ \t]*[,;][ \t]*|[ \t]+)[0-9]{{1,3}}){{{MIN_CODE_RUN - 1},}}(?![0-9])"
)
# Hex codes each with a prefix (\x2d, 0x2d, %2d) and any short separator, or bare
# pairs with a separator (2d 2d, 2d:2d); bare contiguous hex is a commit id, not codes.
_HEX_PREFIXED = r"(?:\\x|0[xX]|%)[0-9A-Fa-f]{2}"
_HEX_RUN = re.compile(rf"{_HEX_PREFIXED}(?:[ \t,;]{{0,2}}{_HEX_PREFIXED}){{{MIN_CODE_RUN - 1},}}")
_HEX_BARE_RUN = re.compile(
    rf"[0-9A-Fa-f]{{2}}(?:[ :,;-][0-9A-Fa-f]{{2}}){{{MIN_CODE_RUN - 1},}}(?![0-9A-Za-z])"
)
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}(?![0-9A-Fa-f])")


def literal_forms(value: str) -> set[str]:
    """Exact strings standing for `value`: reversed, halves, hex, base64 (see module doc)."""
    forms: set[str] = set()
    if len(value) < MIN_VARIANT_LENGTH:
        return forms
    raw = value.encode()
    forms.add(value[::-1])
    forms.update({raw.hex(), raw.hex().upper()})
    forms.add(base64.b64encode(raw).decode().rstrip("="))
    forms.add(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    for middle in {len(value) // 2, (len(value) + 1) // 2}:
        for half in (value[:middle], value[middle:]):
            if len(half) >= MIN_HALF_LENGTH and len(set(half)) >= MIN_HALF_DISTINCT:
                forms.add(half)
    forms.discard(value)
    return forms


def spaced_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every value spaced out, forwards and reversed, or None."""
    alternatives: list[str] = []
    for value in sorted(set(values), key=len, reverse=True):
        if len(value) < MIN_VARIANT_LENGTH:
            continue
        for chars in (value, value[::-1]):
            alternatives.append(_SEP.join(re.escape(c) for c in chars))
    if not alternatives:
        return None
    return re.compile("|".join(alternatives))


def _decode_decimal(run: str) -> bytes:
    """The bytes of a run of decimal codes; empty when a number is not a byte."""
    numbers = [int(n) for n in re.findall(r"[0-9]+", run)]
    return bytes(numbers) if max(numbers) < 256 else b""


def _decode_hex(run: str) -> bytes:
    stripped = re.sub(r"\\x|0[xX]|%", " ", run)
    return bytes(int(pair, 16) for pair in _HEX_PAIR.findall(stripped))


def mask_codes(text: str, would_mask: Callable[[str], bool], mask: str) -> str:
    """`text` with each run of byte codes whose decoded text `would_mask` replaced by `mask`."""
    for pattern, decode, word in (
        (_DEC_RUN, _decode_decimal, "0123456789"),
        (_HEX_RUN, _decode_hex, ""),
        (_HEX_BARE_RUN, _decode_hex, string.ascii_letters + string.digits),
    ):

        def repl(
            match: re.Match[str], decode: Callable[[str], bytes] = decode, word: str = word
        ) -> str:
            start = match.start()
            if start and word and match.string[start - 1] in word:
                return match.group(0)  # the tail of a longer number or word
            raw = decode(match.group(0))
            if not raw:
                return match.group(0)
            # Numbers that decode to control bytes (a row of counts, `1 2 3 ... 10`) are no
            # text at all: not worth asking the scrubber about.
            if sum(32 <= b < 127 or b in (9, 10, 13) or b >= 128 for b in raw) < 0.9 * len(raw):
                return match.group(0)
            decoded = raw.decode("utf-8", "replace")
            return mask if would_mask(decoded) else match.group(0)

        text = pattern.sub(repl, text)
    return text
