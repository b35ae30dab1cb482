"""Exit codes as documented for each failure class: 2 bad input, 3 infrastructure unavailable."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.healjobs import make_calc_repo, patchheal_cli, state_args, write_spec


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: connecting to it is refused


def _llm(base_url: str, *, key_env: str | None = None) -> str:
    lines = [
        "[proposer]",
        'kind = "llm"',
        f'base_url = "{base_url}"',
        'model = "m"',
        "retry_attempts = 1",
        "timeout_seconds = 5",
    ]
    if key_env:
        lines.append(f'api_key_env = "{key_env}"')
    return "\n".join(lines)


def test_an_unreachable_model_endpoint_exits_3_with_a_report(tmp_path: Path) -> None:
    """Regression: an endpoint that cannot be reached ended the heal with exit 1 (not fixed),
    as if candidates had been tried and had failed."""
    repo = make_calc_repo(tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    spec = write_spec(tmp_path / "job.toml", repo, proposer=_llm(url))
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--json", timeout=240)
    assert done.returncode == 3, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["retryable"] is True
    assert "proposer unavailable" in summary["stop_reason"]
    assert (tmp_path / "reports" / "calc" / "report.md").is_file()


def test_a_missing_api_key_exits_2(tmp_path: Path) -> None:
    """Regression: a spec naming an unset API key variable exited 1 like a failed heal."""
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        proposer=_llm("http://127.0.0.1:9/v1", key_env="PATCHHEAL_TEST_UNSET_KEY"),
    )
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), timeout=240)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "PATCHHEAL_TEST_UNSET_KEY is not set" in done.stderr
