"""The secret gate: refuses patches that carry credentials, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchheal.gates.secrets import credentials_in
from patchheal.scrub.scrubber import Scrubber
from tests.test_scrub import _secret_of, seeded

REAL_HUNKS = Path(__file__).parent / "data" / "real_hunks_not_secrets.txt"


def _real_hunks() -> list[tuple[str, str]]:
    """(provenance, hunk) pairs: upstream release diffs the gate once refused."""
    chunks = REAL_HUNKS.read_text().split("### ")[1:]
    return [(chunk.split("\n", 1)[0], chunk.split("\n", 1)[1]) for chunk in chunks]


def _patch_adding(text: str) -> str:
    lines = text.split("\n")
    header = f"--- a/app/settings.py\n+++ b/app/settings.py\n@@ -1,1 +1,{len(lines) + 1} @@\n"
    return header + " import os\n" + "".join(f"+{line}\n" for line in lines)


@pytest.mark.parametrize(("where", "hunk"), _real_hunks(), ids=[w for w, _ in _real_hunks()])
def test_real_upstream_hunks_are_neither_refused_nor_redacted(where: str, hunk: str) -> None:
    """Invariant: an ordinary upstream change (type hints named `password`, test fixtures like
    `user:pass@host`, prose saying "basic", commit ids in URLs) is not a credential."""
    scrubber = Scrubber()
    assert credentials_in(hunk, scrubber) == [], where
    assert scrubber.scrub(hunk) == hunk, where


@pytest.mark.parametrize(("fmt", "text", "secret"), seeded(), ids=[s[0] for s in seeded()])
def test_every_seeded_secret_in_a_patch_is_refused(fmt: str, text: str, secret: str) -> None:
    reasons = credentials_in(_patch_adding(text), Scrubber())
    assert reasons, fmt
    assert _secret_of(text, secret) not in " ".join(reasons), "the reason never shows the value"


def test_the_reason_names_the_file_and_line() -> None:
    token = "ghp_" + "Zq8" * 12
    reasons = credentials_in(_patch_adding(f'API = "x"\nGITHUB = "{token}"'), Scrubber())
    assert len(reasons) == 1
    assert reasons[0].startswith("app/settings.py:3 holds what looks like a credential")


def test_the_jobs_own_secret_values_are_refused_whatever_they_look_like() -> None:
    value = "plain-words-are-the-secret"
    patch = _patch_adding(f"GREETING = '{value}'")
    assert credentials_in(patch, Scrubber()) == [], "not a credential format on its own"
    assert credentials_in(patch, Scrubber([value])), "but it is this job's secret"


@pytest.mark.parametrize(
    "line",
    [
        "def login(user: str, password: str, token: str | None = None) -> Session:",
        'api_key = os.environ["API_KEY"]',
        "token = request.headers.get('X-Token')",
        "if password != confirm_password:",
        "    password: bytes | None = None,",
        "password = getpass.getpass()",
        'raise ValueError("token expired; get a new token")',
        "secret_key = settings.SECRET_KEY",
        "Basic authentication is described below.",
    ],
)
def test_code_that_handles_tokens_and_passwords_is_not_a_credential(line: str) -> None:
    patch = _patch_adding(line)
    assert credentials_in(patch, Scrubber()) == []
    assert Scrubber().scrub(patch) == patch
