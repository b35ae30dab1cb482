"""The subprocess helper's git: hardened, and silent about advice meant for people."""

from __future__ import annotations

from pathlib import Path

from patchheal import proc


def test_host_git_prints_no_hints_or_advice(tmp_path: Path) -> None:
    """Invariant: nothing git prints for patchheal carries `hint:` lines or advice (they
    reach error messages, reports and the terminal): a detached checkout explains
    detached HEAD, a pathspec that matches nothing hints at how to add it anyway."""
    repo = tmp_path / "repo"
    repo.mkdir()
    location = {"GIT_DIR": str(repo / ".git"), "GIT_WORK_TREE": str(repo)}
    said = [proc.git("init", "-q", cwd=repo, location={}).output]
    (repo / "a.txt").write_text("a\n")
    said.append(proc.git("add", "a.txt", cwd=repo, location=location).output)
    said.append(proc.git("commit", "-m", "one", cwd=repo, location=location).output)
    said.append(proc.git("checkout", "HEAD~0^{commit}", cwd=repo, location=location).output)
    (repo / ".gitignore").write_text("ignored.txt\n")
    (repo / "ignored.txt").write_text("x\n")
    said.append(proc.git("add", "ignored.txt", cwd=repo, location=location, check=False).output)
    text = "\n".join(said)
    assert "HEAD is now at" in text  # the checkout did detach
    assert "hint:" not in text
    assert "You are in 'detached HEAD' state" not in text
