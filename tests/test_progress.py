"""The terminal: a sign of life on long waits, -q/-v, colour only where wanted."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.commands.progress import Progress
from patchheal.harness.engine import containers, dockerapi
from tests.healjobs import FIX, diff_for, make_calc_repo, state_args, write_spec

ANSI = re.compile(r"\x1b\[")


def test_a_silent_wait_longer_than_the_threshold_is_shown() -> None:
    """Regression: 41 s of silence while a base image built."""
    out = io.StringIO()
    with Progress("job", stream=out, quiet_after=0.3, log_every=0.5) as progress:
        progress.say("building the base image")
        time.sleep(1.6)
    waiting = [line for line in out.getvalue().splitlines() if "waiting" in line]
    assert waiting, out.getvalue()
    assert all("building the base image" in line for line in waiting)
    assert len(waiting) <= 4  # off a terminal it repeats slowly, never floods a log


def test_the_waiting_line_names_what_is_under_way_not_the_last_line() -> None:
    """Regression (issue 27): the waiting line repeated the line before it (`… Can't
    uninstall 'wheel' (waiting 12 s)`, `… -> rejected_policy (waiting 5 s)`), which read as
    an error or a stall. It names what the run waits on instead."""
    for said, expected in (
        (["setup: pip install -e .", "Can't uninstall 'wheel'"], "the job's setup"),
        (["attempt 1: 01-gut.patch -> rejected_policy: test tampering"], "the next candidate"),
        (["step 1 (unit): reproducing `pytest -q`"], "step 1's reproduction run"),
    ):
        out = io.StringIO()
        with Progress("job", stream=out, quiet_after=0.2, log_every=0.3) as progress:
            for message in said:
                progress.say(message)
            time.sleep(0.8)
        waiting = [line for line in out.getvalue().splitlines() if "waiting" in line]
        assert waiting, out.getvalue()
        assert all(expected in line for line in waiting), waiting
        assert not any(said[-1] in line for line in waiting), waiting


def test_a_short_wait_is_not_decorated() -> None:
    out = io.StringIO()
    with Progress("job", stream=out, quiet_after=2.0) as progress:
        progress.say("step 1: reproducing")
        time.sleep(0.3)
    assert out.getvalue() == "[job] step 1: reproducing\n"


def test_quiet_says_nothing() -> None:
    out = io.StringIO()
    with Progress("job", stream=out, verbosity=-1, quiet_after=0.1) as progress:
        progress.say("anything")
        time.sleep(0.4)
    assert out.getvalue() == ""


@pytest.fixture
def calc_job(tmp_path: Path) -> list[str]:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[diff_for(repo, {"calc.py": FIX})])
    return ["heal", str(spec), *state_args(tmp_path)]


@pytest.mark.slow
def test_quiet_verbose_and_no_color_on_a_real_heal(
    calc_job: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    loud = runner.invoke(cli, calc_job, color=True)
    assert loud.exit_code == 0, loud.output
    assert "[calc] " in loud.stderr
    assert ANSI.search(loud.stdout), "a terminal gets colour"
    quiet = runner.invoke(cli, ["-q", *calc_job, "--resume"], color=True)
    assert quiet.exit_code == 0, quiet.output
    assert "[calc] " not in quiet.stderr
    assert "job calc:" in quiet.stdout
    monkeypatch.setenv("NO_COLOR", "1")
    plain = runner.invoke(cli, calc_job, color=True)
    assert plain.exit_code == 0, plain.output
    assert not ANSI.search(plain.stdout + plain.stderr)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("require_docker")
def test_harness_build_shows_a_long_wait_and_quiet_hides_it(tmp_path: Path) -> None:
    """Invariant: an image build that is silent for more than 2 s says what it waits on
    (on a log: one line, not a redraw), and `-q` leaves only the result on stdout."""
    import subprocess
    import sys
    import uuid

    from patchheal.harness.definitions import load_harness
    from patchheal.harness.images import recipe

    repo = tmp_path / "proj"
    folder = repo / "harnesses" / "slowbuild"
    folder.mkdir(parents=True)
    (folder / "harness.toml").write_text(
        'name = "slowbuild"\n[image]\nharness = "python"\ndockerfile = "Dockerfile"\n'
        "check = \"python3 -c 'import sys'\"\n"
    )

    def build(*flags: str) -> subprocess.CompletedProcess[str]:
        # A new recipe each time (content-addressed tags): a real build, silent for 4 s.
        (folder / "Dockerfile").write_text(
            f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nRUN sleep 4 && echo {uuid.uuid4().hex}\n"
        )
        argv = [sys.executable, "-m", "patchheal", *flags, "harness", "build", "slowbuild"]
        done = subprocess.run(
            [*argv, "--repo", str(repo)], capture_output=True, text=True, timeout=600
        )
        client = dockerapi.engine()
        containers.remove_image(client, recipe.image_tag(load_harness("slowbuild", repo)))
        return done

    loud = build()
    assert loud.returncode == 0, loud.stderr
    waiting = [line for line in loud.stderr.splitlines() if "… waiting " in line]
    assert waiting, loud.stderr
    assert waiting[0].startswith("[harness build slowbuild] … ")
    assert "\r" not in loud.stderr  # not a terminal: lines, never a redraw
    quiet = build("-q")
    assert quiet.returncode == 0, quiet.stderr
    assert "… waiting " not in quiet.stderr
    assert quiet.stdout.startswith("patchheal/slowbuild:")


def test_a_long_progress_line_is_cut_between_words() -> None:
    """Regression (issue 34): `… newly failing: tests/test_r …` cut a test id mid-word."""
    from patchheal.loop.step import first_line

    reason = (
        "the failing step passes but the regression steps got worse: passed before, not now: "
        "tests/test_rules.py::test_no_discount_below_ten; newly failing: "
        "tests/test_rules.py::test_no_discount_below_ten"
    )
    line = first_line(reason, 160)
    assert line.endswith(" …")
    kept = line.removesuffix(" …")
    assert len(kept) <= 160
    assert reason.startswith(kept)
    assert reason[len(kept)] in " ,;:"  # the cut falls between words
    assert first_line("x" * 300, 160) == "x" * 160 + " …"  # one long word: cut where it must
    assert first_line("short\nsecond line", 160) == "short …"
    assert first_line("short", 160) == "short"


def test_the_waiting_line_is_cut_between_words_or_after_a_folder() -> None:
    """Regression (issue 34): `… waiting 2 s on pip download on the host into …/wheelhou`."""
    from patchheal.commands.progress import waiting_on

    message = (
        "pip download on the host into /tmp/pytest-of-root/pytest-166/home1/.cache/patchheal/"
        "wheelhouse/cp311: setuptools>=61 wheel"
    )
    said = waiting_on(message, "before")
    assert said == "pip download on the host into /tmp/pytest-of-root/pytest-166/home1/.cache/ …"
    words = "building the image patchheal-python:3.11 from Debian's packages " * 3
    assert waiting_on(words, "before").endswith("packages building the …")
    assert waiting_on("setup: creating venv for python 3.11", "x") == (
        "the job's setup (venv for python 3.11)"
    )
