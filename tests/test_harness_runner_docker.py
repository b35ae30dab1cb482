"""The python harness image is a runner-like base (issue 32, item 4), with real Docker.

What hosted CI runners' test suites commonly assume beside Python: a time-zone
database (marshmallow's conftest: zoneinfo 'America/Chicago'), UTF-8 locales,
a pager (click's pager tests: `less`), a C compiler with the Python headers,
make, procps, archive tools, git; and the environment a CI provider sets
(CI=true, a writable HOME, LANG). A job adds Debian packages with
`[job] packages`, in an image of their own that the same list reuses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.images import build as images
from patchheal.harness.images import recipe
from patchheal.harness.inference import pythons

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker

RUNNER_CHECK = r"""
set -e
python3 - <<'EOF'
import locale, os, sys, zoneinfo
from datetime import datetime
chicago = datetime(2024, 1, 15, 12, tzinfo=zoneinfo.ZoneInfo("America/Chicago"))
assert chicago.utcoffset().total_seconds() == -6 * 3600, chicago.utcoffset()
locale.setlocale(locale.LC_ALL, "en_US.UTF-8")
locale.setlocale(locale.LC_ALL, "C.UTF-8")
assert sys.getfilesystemencoding() == "utf-8"
print("python", sys.version_info[:2], "ok")
EOF
printf 'one\ntwo\n' | less -F -X >/dev/null
printf '#include <Python.h>\nint main(void){return PY_MAJOR_VERSION == 3 ? 0 : 1;}\n' > /tmp/t.c
cc $(python3-config --includes) -o /tmp/t /tmp/t.c && /tmp/t
printf 'all:\n\t@echo made\n' > /tmp/Makefile && make -s -C /tmp
printf '#include <yaml.h>\nint main(void){yaml_parser_t p;\n' > /tmp/y.c
printf 'return !yaml_parser_initialize(&p);}\n' >> /tmp/y.c
cc -o /tmp/y /tmp/y.c -lyaml && /tmp/y
ps -o pid= -p $$ >/dev/null
echo x > /tmp/a && xz -k /tmp/a && bzip2 -k /tmp/a
(cd /tmp && zip -q a.zip a && unzip -q -o a.zip)
git --version >/dev/null
touch "$HOME/.writable"
echo "CI=$CI LANG=$LANG HOME=$HOME"
locale -a
"""


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("python", ["3.9", "3.11", "3.13"])
def test_the_image_has_what_a_runner_has(
    python_image: str, python_def: HarnessDef, tmp_path: Path, python: str
) -> None:
    defn = pythons.with_python(python_def, python, "the test")
    h = DockerHarness(defn, job_id=f"runner-{python}-{os.getpid()}")
    try:
        result = h.run(RUNNER_CHECK, tmp_path, timeout=300, idle_timeout=300)
    finally:
        h.close()
    assert result.exit_code == 0, result.output
    assert f"python ({python.replace('.', ', ')}) ok" in result.output
    assert "made" in result.output
    assert "CI=true LANG=C.UTF-8 HOME=/tmp" in result.output
    # `locale -a` spells them C.UTF-8 or C.utf8 (bullseye), en_US.utf8.
    found = {line.strip().lower().replace("-", "") for line in result.output.splitlines()}
    assert {"c.utf8", "en_us.utf8"} <= found, result.output


# The first run builds the jq image from Debian's packages (60-250 s here, by the mirror).
@pytest.mark.timeout(1500)
def test_job_packages_are_installed_and_their_image_is_reused(
    python_image: str, python_def: HarnessDef, engine: Any, tmp_path: Path
) -> None:
    with_jq = recipe.with_packages(python_def, ["jq"])
    said: list[str] = []
    h = DockerHarness(with_jq, job_id=f"packages-{os.getpid()}", say=said.append)
    try:
        result = h.run("echo '{\"a\": 41}' | jq '.a + 1'", tmp_path, timeout=900, idle_timeout=900)
    finally:
        h.close()
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "42"
    tag = recipe.image_tag(with_jq)
    assert tag != python_image
    # The same list, in any order and repeated, is the same image: nothing is built again.
    again: list[str] = []
    same = recipe.with_packages(python_def, ["jq", "jq"])
    assert images.ensure_image(engine, same, say=again.append) == tag
    assert again == []
    # The base image itself has no jq: the package came from the job's list.
    plain = DockerHarness(python_def, job_id=f"nopackages-{os.getpid()}")
    try:
        without = plain.run("command -v jq || echo none", tmp_path, timeout=60, idle_timeout=60)
    finally:
        plain.close()
    assert without.output.strip() == "none", without.output
