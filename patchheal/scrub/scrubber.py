"""Secret scrubbing: the one filter every write path uses (store, events, logs, reports, context).

`scrub(text)` masks known token formats, secret-looking assignments and the
values of secret-looking environment variables. A `Scrubber` adds a job's own
secret values. Known formats come from hand-written rules for what
detect-secrets misses or matches only partly (new OpenAI/Anthropic keys, long
GitHub tokens, JWT signatures, Authorization headers) plus detect-secrets'
own regex plugins and its Shannon-entropy measure for bare high-entropy tokens.

Speed: each rule has literal pre-filters (C-speed `str.find`), and slow
case-insensitive rules run only on the lines that hold a hit, so a clean log
costs a few substring scans. The output is a fixed point: scrubbing twice
gives the same text.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from patchheal.scrub import variants
from patchheal.scrub.rules import (
    RULES,
    Rule,
    detect_secrets_rules,
    entropy,
    value_is_masked,
)

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6

# Environment variable names whose values are secrets.
SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw(or)?d|passphrase|credential|api_?key|access_?key|private_?key"
    r"|(^|_)key($|_)|_dsn$|cookie|session_?id|auth_?token|(^|_)auth($|_))"
)
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "PWD", "OLDPWD"})
_NOT_SECRET_VALUES = frozenset({"true", "false", "none", "null", "yes", "no"})


# Bare high-entropy tokens (a pasted AWS secret key, a random API key).
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_TOKEN_TABLE = bytes(0x61 if b in _TOKEN_CHARS else 0x20 for b in range(256))
_TOKEN_RUN = b"a" * 32
_WORDISH = re.compile(r"[a-z]{4,}")
WORDISH_SHARE = 0.4
ENTROPY_LIMIT = 4.2  # bits/char; a random 32-char base64 string sits near 4.6


def _is_secret_name(name: str) -> bool:
    return name.upper() not in _NOT_SECRET_NAMES and SECRET_NAME.search(name) is not None


def _masked(secret: str) -> str:
    """The mask for a secret; a quoted literal keeps its quotes (so JSON stays JSON)."""
    if len(secret) > 1 and secret[0] in "\"'" and secret[-1] == secret[0]:
        return secret[0] + MASK + secret[0]
    return MASK


def _skipped(rule: Rule, match: re.Match[str]) -> bool:
    """A match with nothing to mask, or whose value is code, prose or a placeholder."""
    value = match.group(rule.group) if match.start(rule.group) >= 0 else ""
    return value in ("", MASK) or not value_is_masked(value, rule.value_check)


def _mask_group(rule: Rule) -> Callable[[re.Match[str]], str]:
    group = rule.group

    def repl(match: re.Match[str]) -> str:
        if _skipped(rule, match):
            return match.group(0)
        whole, start = match.group(0), match.start()
        masked = _masked(match.group(group))
        return whole[: match.start(group) - start] + masked + whole[match.end(group) - start :]

    return repl


def _sub_hits(rule: Rule, repl: Callable[[re.Match[str]], str], text: str, hay: str) -> str:
    """Apply `rule` only where its literals occur: anchored at each hit, or on each hit line."""
    anchored = rule.anchored and len(hay) == len(text)  # lower() may change the length
    matches: dict[int, re.Match[str]] = {}
    lines_done: set[int] = set()
    for literal in rule.literals:
        pos = hay.find(literal)
        while pos >= 0:
            if anchored:  # matches start at the literal: no line scan needed
                match = rule.pattern.match(text, pos)
                if match:
                    matches.setdefault(match.start(), match)
                pos = hay.find(literal, pos + len(literal))
                continue
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            if start not in lines_done:
                lines_done.add(start)
                for match in rule.pattern.finditer(text, start, end):
                    matches.setdefault(match.start(), match)
            pos = hay.find(literal, end)
    # Mask the secret spans (not whole matches): a value that swallowed the next keyword
    # (`A_SECRET=password: x`) must not hide that keyword's own value from being masked.
    spans: list[tuple[int, int, str]] = []
    for _, match in sorted(matches.items()):
        group = rule.group
        if _skipped(rule, match):
            continue
        start, end, masked = match.start(group), match.end(group), _masked(match.group(group))
        if spans and start < spans[-1][1]:
            prev_start, prev_end, _ = spans.pop()
            start, end, masked = prev_start, max(end, prev_end), MASK
        spans.append((start, end, masked))
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end, masked in spans:
        parts += (text[last:start], masked)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _any_present(rule: Rule, haystack: str, seen: dict[tuple[str, bool], bool]) -> bool:
    for literal in rule.literals:
        key = (literal, rule.lowered)
        found = seen.get(key)
        if found is None:
            found = seen[key] = literal in haystack
        if found:
            return True
    return False


class Scrubber:
    """Masks secrets in text; `secret_values` are exact strings masked wherever they appear."""

    def __init__(self, secret_values: Iterable[str] = ()) -> None:
        values: set[str] = set()
        for value in secret_values:
            value = value.strip()
            if len(value) < MIN_SECRET_LENGTH or value.lower() in _NOT_SECRET_VALUES:
                continue
            if value in MASK:  # masking it would grow the mask on every pass
                continue
            values.add(value)
            quoted = urllib.parse.quote(value, safe="")
            if quoted != value:
                values.add(quoted)
        # Disguised forms (reversed, halves, hex, base64, spaced out): scrub/variants.py.
        self._spaced = variants.spaced_pattern(values)
        values.update(f for v in tuple(values) for f in variants.literal_forms(v) if f not in MASK)
        self._values = tuple(sorted(values, key=len, reverse=True))
        self._rules = RULES + detect_secrets_rules()
        self._repls = [_mask_group(rule) for rule in self._rules]
        self.entropy = entropy()

    @classmethod
    def from_env(
        cls, names: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> Scrubber:
        """Mask the values of `names` and of every secret-looking variable in `environ`."""
        env = os.environ if environ is None else environ
        wanted = set(names)
        values = [v for k, v in env.items() if k in wanted or _is_secret_name(k)]
        return cls(values)

    def scrub(self, text: str) -> str:
        if _BINARY_HEADER not in text:
            return self._fixed_point(text)
        # The data lines of a git binary patch are base85-encoded bytes: a plaintext secret
        # is never there, and the pattern rules only find noise in them (a random
        # `key=...` that refused an allowed .pyc now and then, depending on its bytes).
        # Masking them would also break the patch. Only the job's own values are looked for.
        parts, start = [], 0
        for block in _binary_blocks(text):
            parts += [self._fixed_point(text[start : block.start()]), self._values_in(block[0])]
            start = block.end()
        return "".join([*parts, self._fixed_point(text[start:])])

    def _values_in(self, text: str) -> str:
        for secret in self._values:
            text = text.replace(secret, MASK)
        return text

    def _fixed_point(self, text: str) -> str:
        # Loop to a fixed point so that scrub(scrub(x)) == scrub(x) whatever the rule order;
        # text without secrets costs one pass.
        for _ in range(4):
            new = self._scrub_once(text)
            if new == text:
                return new
            text = new
        return text

    def scrub_obj(self, value: Any) -> Any:
        """Scrub every string inside dicts, lists and tuples (JSON payloads)."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub_obj(k): self.scrub_obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub_obj(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.scrub_obj(v) for v in value)
        return value

    def _scrub_once(self, text: str, *, codes: bool = True) -> str:
        for secret in self._values:
            if secret in text:
                text = text.replace(secret, MASK)
        if self._spaced is not None:
            text = self._spaced.sub(MASK, text)
        lowered: str | None = None
        seen: dict[tuple[str, bool], bool] = {}  # literal presence, shared by rules until a change
        for rule, repl in zip(self._rules, self._repls, strict=True):
            haystack = text
            if rule.lowered:
                lowered = text.lower() if lowered is None else lowered
                haystack = lowered
            if rule.literals and not _any_present(rule, haystack, seen):
                continue
            if rule.literals and not rule.multiline:
                new = _sub_hits(rule, repl, text, haystack)
            else:
                new = rule.pattern.sub(repl, text)
            if new != text:
                text, lowered = new, None
                seen.clear()
        text = self._mask_entropy(text)
        if codes:  # byte codes whose decoded text holds a secret (H1 printed a key as decimals)
            text = variants.mask_codes(text, self._would_mask, MASK)
        return text

    def _would_mask(self, decoded: str) -> bool:
        return self._scrub_once(decoded, codes=False) != decoded

    def _mask_entropy(self, text: str) -> str:
        # Runs of token characters found with a bytes translate + find (~1 GB/s) instead of a
        # regex scan (~50 MB/s); 'replace' keeps one byte per character, so offsets agree.
        runs = text.encode("ascii", "replace").translate(_TOKEN_TABLE)
        parts: list[str] = []
        last = 0
        pos = runs.find(_TOKEN_RUN)
        while pos >= 0:
            end = runs.find(b" ", pos)
            end = len(runs) if end < 0 else end
            token = text[pos:end]
            if self._looks_random(token):
                parts += (text[last:pos], MASK)
                last = end
            pos = runs.find(_TOKEN_RUN, end)
        if not parts:
            return text
        parts.append(text[last:])
        return "".join(parts)

    def _looks_random(self, token: str) -> bool:
        # Cheap C-level checks first: hashes are one case, identifiers and paths are words.
        if token.islower() or token.isupper() or token.isalpha() or token.isdigit():
            return False
        if not any(c.isdigit() for c in token):
            return False
        # Identifiers and paths are mostly lowercase words; random tokens rarely (<1%).
        if sum(map(len, _WORDISH.findall(token))) >= WORDISH_SHARE * len(token):
            return False
        # A URL or file path with a commit id in it (`github.com/o/r/blob/<sha>/Lib/x`): two or
        # more all-lowercase word segments; a random base64 token almost never has one.
        parts = token.split("/")
        if sum(1 for p in parts if len(p) >= 3 and p.isalpha() and p.islower()) >= 2:
            return False
        return self.entropy(token) >= ENTROPY_LIMIT


_default_lock = threading.Lock()
_default: tuple[tuple[str, ...], Scrubber] | None = None
_name_is_secret: dict[str, bool] = {}


def _env_secret_values() -> tuple[str, ...]:
    values = []
    for name, value in os.environ.items():
        secret = _name_is_secret.get(name)
        if secret is None:
            secret = _name_is_secret[name] = _is_secret_name(name)
        if secret:
            values.append(value)
    return tuple(values)


def default_scrubber() -> Scrubber:
    """The process-wide scrubber: known formats plus this process's secret-looking env values.

    Rebuilt only when those values change (tests and jobs may set variables late).
    """
    global _default
    values = _env_secret_values()
    current = _default
    if current is not None and current[0] == values:
        return current[1]
    with _default_lock:
        _default = (values, Scrubber(values))
        return _default[1]


_BINARY_HEADER = "GIT binary patch\n"
_BASE85 = re.compile(r"[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]+")
_BINARY_BLOCK = re.compile(r"^GIT binary patch\n(?:(?:literal|delta) \d+\n(?:[^\n]+\n)*?\n)+", re.M)


def _is_base85_line(line: str) -> bool:
    """A data line of git's binary patch: its first letter gives the byte count (A-Z 1-26,
    a-z 27-52), and the rest is exactly the base85 of that many bytes."""
    if len(line) < 6 or not line[0].isascii() or not line[0].isalpha():
        return False
    count = ord(line[0]) - (ord("A") - 1 if line[0].isupper() else ord("a") - 27)
    return len(line) - 1 == -(-count // 4) * 5 and _BASE85.fullmatch(line, 1) is not None


def _binary_blocks(text: str) -> Iterable[re.Match[str]]:
    """The git binary patch blocks of `text` whose every data line is well formed base85;
    any other line (a secret dressed as a patch, say) leaves its block to the rules."""
    for block in _BINARY_BLOCK.finditer(text):
        lines = block[0].split("\n")[1:]
        data = [ln for ln in lines if ln and not re.fullmatch(r"(?:literal|delta) \d+", ln)]
        if data and all(_is_base85_line(ln) for ln in data):
            yield block


def scrub(text: str) -> str:
    """Mask secrets in `text` with the process-wide default scrubber."""
    return default_scrubber().scrub(text)
