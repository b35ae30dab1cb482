"""Proposer-side costs: SEARCH matching, token counting, context rendering, an llm round trip.

Each row is compared with a floor measured in the same run:
- SEARCH matching on a 5000-line file vs `str.find` of the same text;
- token counting (the tokenizer in use and the estimate) vs `len(text.encode())`;
- rendering a full retry context within budgets vs serializing it to JSON;
- one `LLMProposer.propose` against a loopback server (render, HTTP, parse, apply,
  `git diff`) vs one bare HTTP POST of the same size to the same server.

Run: python benchmarks/bench_proposers.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chat_server import ChatServer, Reply

from patchheal.config import JobSpec
from patchheal.evidence.build import render_context
from patchheal.evidence.tokens import count_tokens, estimate_tokens, tokenizer_name
from patchheal.models import CodeExcerpt, Hint, Outcome, PriorAttempt, RetryContext
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import LLMConfig
from patchheal.proposers.llm import LLMProposer
from patchheal.proposers.matching import locate


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def row(name: str, ms: float, floor_name: str, floor_ms: float) -> None:
    ratio = ms / floor_ms if floor_ms > 0 else float("inf")
    print(f"| {name:<38} | {ms:>9.3f} | {floor_name:<26} | {floor_ms:>9.3f} | {ratio:>8.1f}x |")


def matching() -> None:
    lines = [f"    value_{i} = compute_{i * 7919 % 1000}(arg_{i % 17}, {i})\n" for i in range(5000)]
    text = "".join(lines)
    exact = "".join(lines[3000:3010])
    spaced = exact.replace("    ", "\t")
    drifted = exact.replace("compute_", "computer_", 1)
    floor = median_ms(lambda: text.find(exact), 50)
    row("locate exact (5000 lines)", median_ms(lambda: locate(text, exact), 50), "str.find", floor)
    row(
        "locate whitespace-insensitive",
        median_ms(lambda: locate(text, spaced), 10),
        "str.find",
        floor,
    )
    row(
        "locate fuzzy (one drifted line)",
        median_ms(lambda: locate(text, drifted), 10),
        "str.find",
        floor,
    )


def tokens() -> None:
    stdlib = Path(json.__file__).parents[1]
    text = "".join(p.read_text(errors="replace") for p in sorted(stdlib.glob("*.py"))[:60])
    mb = len(text.encode()) / 1e6
    floor = median_ms(lambda: len(text.encode()), 5)
    real = median_ms(lambda: count_tokens(text), 3)
    est = median_ms(lambda: estimate_tokens(text), 3)
    row(f"count_tokens, real tokenizer ({mb:.1f} MB)", real, "len(text.encode())", floor)
    row(f"estimate_tokens ({mb:.1f} MB)", est, "len(text.encode())", floor)
    print(
        f"  throughput: {mb / real * 1000:.1f} MB/s real, {mb / est * 1000:.1f} MB/s estimate; "
        f"estimate/real token ratio {estimate_tokens(text) / count_tokens(text):.3f}"
    )


def context() -> RetryContext:
    code = "\n".join(f"    line_{i} = helper(line_{i - 1})" for i in range(60))
    return RetryContext(
        job_id="bench",
        step_name="unit",
        command="pytest -q",
        fingerprint="f" * 64,
        error_type="ZeroDivisionError",
        failure_summary="E   ZeroDivisionError\n" * 80,
        failing_tests=("tests/test_x.py::test_y",),
        excerpts=tuple(CodeExcerpt(file=f"src/m{i}.py", start_line=1, text=code) for i in range(6)),
        breaking_diff="+x = 1\n" * 300,
        file_map=tuple(f"src/pkg/module_{i:04d}.py" for i in range(400)),
        constraints=("Do not edit tests.",),
        prior_attempts=tuple(
            PriorAttempt(
                attempt_number=i,
                strategy="add_guard",
                touched_files=("src/m0.py",),
                diff_hash="ab" * 6,
                outcome=Outcome.NO_EFFECT,
                reason="still fails",
            )
            for i in range(1, 4)
        ),
        hints=tuple(
            Hint(fingerprint="e" * 64, similarity=0.9, strategy="fix_logic", diff="+y = 2\n" * 50)
            for _ in range(3)
        ),
    )


def rendering() -> None:
    ctx = context()
    floor = median_ms(ctx.model_dump_json, 20)
    for budget in (100_000, 4000, 800):
        ms = median_ms(lambda b=budget: render_context(ctx, max_tokens=b), 5)
        row(f"render_context budget {budget}", ms, "model_dump_json", floor)


def round_trip() -> None:
    reply = (
        "STRATEGY: add_guard\nRATIONALE: r\n\ncalc.py\n<<<<<<< SEARCH\n    return a / b\n"
        "=======\n    return a / b if b else 0.0\n>>>>>>> REPLACE\n"
    )
    runs = 15
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        (repo / "calc.py").write_text("def div(a, b):\n    return a / b\n")
        for args in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "i"],
        ):
            subprocess.run(["git", *args], cwd=repo, check=True)
        job = JobSpec.model_validate(
            {"job": {"id": "bench", "repo": tmp}, "steps": [{"name": "u", "command": "true"}]}
        )
        request = ProposalRequest(context=context(), worktree=repo, attempt_number=1)
        with ChatServer([Reply(content=reply) for _ in range(2 * runs)]) as server:
            proposer = LLMProposer(LLMConfig(base_url=server.url, model="m"), job=job)

            def propose() -> None:
                proposer.propose(request)
                subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)

            body = json.dumps(
                {
                    "model": "m",
                    "messages": [
                        {
                            "role": "user",
                            "content": render_context(request.context, max_tokens=6000),
                        }
                    ],
                }
            )

            def bare() -> None:
                req = urllib.request.Request(
                    server.url + "/chat/completions",
                    data=body.encode(),
                    headers={"Content-Type": "application/json"},
                )
                urllib.request.urlopen(req, timeout=10).read()

            floor = median_ms(bare, runs)
            row("LLMProposer.propose (loopback)", median_ms(propose, runs), "bare HTTP POST", floor)


def main() -> None:
    print(f"tokenizer in use: {tokenizer_name()}")
    print(f"| {'what':<38} | {'median ms':>9} | {'floor':<26} | {'floor ms':>9} | {'ratio':>9} |")
    print(f"|{'-' * 40}|{'-' * 11}|{'-' * 28}|{'-' * 11}|{'-' * 11}|")
    matching()
    tokens()
    rendering()
    round_trip()


if __name__ == "__main__":
    main()
