"""The secret gate: a candidate that carries a credential is refused before it runs.

The gate and the scrubber are one judgment: a patch is refused exactly when the
job's scrubber would change it. That keeps an invariant the store relies on: an
accepted diff is stored byte for byte (scrubbing it changes nothing), so a
checkpoint or a replay never meets a half-masked patch. Precision therefore
lives in the scrubber's rules (scrub/rules.py): known credential formats, the
job's own secret values, keyword assignments only when the value looks random,
never the words `token`/`password` alone or the structure of a diff;
benchmarks/bench_secret_precision.py measures it on real upstream diffs.
"""

from __future__ import annotations

import re

from patchheal.scrub.scrubber import Scrubber

_FILE = re.compile(r"^\+\+\+ (?:b/)?(.*?)\s*$")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
SHOWN_CHARS = 120


def credentials_in(diff: str, scrubber: Scrubber) -> list[str]:
    """Why `diff` is refused (one reason per line the scrubber would mask), or [] if clean.

    Reasons name the file and the new-side line and show the line as masked, never the value.
    """
    scrubbed = scrubber.scrub(diff)
    if scrubbed == diff:
        return []
    reasons: list[str] = []
    path, new_line = "?", 0
    before, after = diff.splitlines(), scrubbed.splitlines()
    if len(before) != len(after):  # a masked multi-line block (a PEM key): name the first line
        for index, (old, new) in enumerate(zip(before, after, strict=False)):
            if old != new:
                return [f"line {index + 1} of the patch starts what looks like a private key"]
        return ["the patch contains what looks like a private key"]
    for old, new in zip(before, after, strict=True):
        file_match, hunk_match = _FILE.match(old), _HUNK.match(old)
        if file_match:
            path = file_match.group(1)
        elif hunk_match:
            new_line = int(hunk_match.group(1)) - 1
        if old != new:
            where = f"{path}:{new_line + 1}" if old[:1] in "+ " else path
            reasons.append(
                f"{where} holds what looks like a credential (`{new.strip()[:SHOWN_CHARS]}`)"
            )
        if not (file_match or hunk_match) and old[:1] in "+ ":
            new_line += 1
    return reasons
