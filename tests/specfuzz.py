"""Malformed job specs, generated deterministically from a valid one (seeded).

Each case is (name, spec path); the files it needs (a FIFO named `*.patch`, a
directory where a log is expected, ...) are created under the case's folder.
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FIX = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a - b\n+    return a + b\n"
)

# Values of every type and several sizes, each wrong somewhere.
NASTY: list[Any] = [
    "",
    "x" * 70_000,
    "a\0b",
    "~nonexistentuser-9f3/x",
    "/" + "d" * 300 + "/x",
    "a/" * 3000,
    "-c core.pager=evil",
    "--upload-pack=touch /tmp/pwned",
    "[z-a]",
    "**/[",
    "\u202e\u0000",
    "..",
    "main..topic",
    0,
    -1,
    10**9,
    10**18,
    2**63,
    -(2**63),
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    0.0,
    -0.5,
    True,
    False,
    [],
    [1, 2],
    [[["deep"]]],
    {},
    {"k": "v"},
    {"kind": "nope"},
    # Forms that ended in internal errors (issue 25): results globs, harness names, URLs.
    "***",
    ".",
    "a/" * 600 + "*.xml",
    "h" * 300,
    "http://[::1",
    "http://h:99999/v1",
]

# A YAML alias bomb of 396 bytes (the probe's was 412): nine anchors, each nine aliases
# of the one before.
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)

KEYS: dict[str, list[str]] = {
    "job": ["id", "repo", "base", "harness", "setup", "env", "last_green", "objective"],
    "step": ["name", "command", "log", "junit", "results"],
    "regression": ["command"],
    "proposer": ["kind", "dir", "paths", "after_failures", "base_url", "model"],
    "budget": [
        "max_attempts",
        "step_timeout_seconds",
        "idle_timeout_seconds",
        "no_progress_limit",
        "max_hard_resets",
        "job_wall_seconds",
        "max_proposer_calls",
        "max_model_tokens",
        "flaky_reruns",
    ],
    "policy": [
        "protected_paths",
        "extra_protected_paths",
        "test_paths",
        "allow_test_changes",
        "max_changed_lines",
        "max_files",
    ],
}


def valid_spec(root: Path) -> dict[str, Any]:
    """A spec that loads: every table present, with its files."""
    patches = root / "patches"
    patches.mkdir(parents=True, exist_ok=True)
    (patches / "01-fix.patch").write_text(FIX)
    (root / "ci.log").write_text("E   assert 1 == 5\n")
    return {
        "job": {"id": "fuzz-1", "repo": str(root), "base": "main", "harness": "local"},
        "steps": [{"name": "unit", "command": "pytest -q", "log": "ci.log"}],
        "regression": {"command": "pytest -q"},
        "proposer": {"kind": "patchfiles", "dir": "patches"},
        "budget": {"max_attempts": 2, "flaky_reruns": 1},
        "policy": {"extra_protected_paths": ["docs/**"], "max_files": 5},
    }


class Deep:
    """A value nested `depth` deep (arrays or inline tables), rendered without recursion."""

    def __init__(self, depth: int, arrays: bool) -> None:
        self.depth, self.arrays = depth, arrays

    def toml(self) -> str:
        if self.arrays:
            return "[" * self.depth + '"x"' + "]" * self.depth
        return "{ k = " * self.depth + '"x"' + " }" * self.depth


def toml_value(value: Any) -> str:
    if isinstance(value, Deep):
        return value.toml()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # JSON escapes are TOML basic-string escapes (\u0000 included).
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return (
        "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    )


def to_toml(data: dict[str, Any]) -> str:
    """Every top-level entry as `key = value` (inline tables), which TOML allows for any shape."""
    return "\n".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in data.items()) + "\n"


def _table(data: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """A table of the spec to mutate, and which key list belongs to it."""
    name = rng.choice(["job", "step", "regression", "proposer", "budget", "policy"])
    steps = data.get("steps")
    if name == "step":
        table = steps[0] if isinstance(steps, list) and steps else None
    else:
        table = data.get(name)
    # An earlier mutation may have replaced it with something else: mutate a fresh one.
    if not isinstance(table, dict):
        table = data[name if name != "step" else "regression"] = {}
    return table, name


def structural(rng: random.Random, root: Path) -> dict[str, Any]:
    data = valid_spec(root)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        if kind == 0:  # a known key gets a nasty value
            table, name = _table(data, rng)
            table[rng.choice(KEYS[name])] = copy.deepcopy(rng.choice(NASTY))
        elif kind == 1:  # a whole table becomes the wrong type
            data[rng.choice([*data, "proposers"])] = copy.deepcopy(rng.choice(NASTY))
        elif kind == 2:  # unknown keys
            table, _ = _table(data, rng)
            table[rng.choice(["idd", "comand", "max_attempt", "\0", "x" * 300])] = 1
        elif kind == 3:  # a required key goes missing
            table, name = _table(data, rng)
            table.pop(rng.choice(KEYS[name]), None)
        elif kind == 4 and rng.random() < 0.3:  # a hostile value where it once crashed
            hostile(rng, data)
        elif kind == 4:  # deep nesting, in a list or in inline tables
            table, name = _table(data, rng)
            table[rng.choice(KEYS[name])] = Deep(rng.choice([20, 200, 3000]), rng.random() < 0.5)
        else:  # many entries
            data["steps"] = [
                {"name": f"s{i}", "command": "true"} for i in range(rng.choice([0, 2000]))
            ]
    return data


def hostile(rng: random.Random, data: dict[str, Any]) -> None:
    """One of the spec values that once ended in an internal error (issue 25)."""
    choice = rng.randrange(4)
    steps = data.get("steps")
    step = steps[0] if isinstance(steps, list) and steps and isinstance(steps[0], dict) else {}
    if choice == 0:
        step["results"] = rng.choice(["***", ".", "", "/", "a/" * 600 + "*.xml", "**/" * 40 + "x"])
    elif choice == 1:
        job = data.get("job")
        data["job"] = {
            **(job if isinstance(job, dict) else {}),
            "harness": "h" * rng.choice([256, 300, 5000]),
        }
    elif choice == 2:
        url = rng.choice(["http://[::1", "http://h:99999/v1", "http://", "https://[zz]/"])
        data["proposer"] = {"kind": "llm", "base_url": url, "model": "m"}
    else:
        data["budget"] = {"max_attempts": rng.choice([0, -1, 10**12])}


def _workflow_repo(case: Path, text: str) -> None:
    """`case` as a git repository holding `ci.yml` (a workflow is read from the job's repo)."""
    import subprocess

    (case / "ci.yml").write_text(text)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "f",
        "GIT_AUTHOR_EMAIL": "f@f",
        "GIT_COMMITTER_NAME": "f",
        "GIT_COMMITTER_EMAIL": "f@f",
    }
    for argv in (["init", "-q", "-b", "main"], ["add", "ci.yml"], ["commit", "-qm", "ci"]):
        subprocess.run(["git", "-C", str(case), *argv], check=True, env=env)


def workflow_kinds(case: Path, index: int) -> dict[str, Any]:
    """Workflows that once crashed the loader: nested 100,000 deep, an alias bomb, a cycle."""
    data = valid_spec(case)
    text = [
        "jobs:\n  test: " + "[" * 100_000 + "]" * 100_000 + "\n",
        ALIAS_BOMB + "jobs:\n  test: {runs-on: ubuntu-latest, steps: [{run: pytest}], x: *i}\n",
        "jobs: &j\n  test: {runs-on: ubuntu-latest, steps: [{run: pytest}], again: *j}\n",
        "jobs:\n  test: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pytest -q\n",
    ][index % 5]
    _workflow_repo(case, text)
    data["job"] = {
        "id": "fuzz-wf",
        "repo": str(case),
        "base": "main",
        "workflow": "ci.yml",
        "workflow_job": "test",
    }
    data.pop("steps")
    return data


def _deep_text(depth: int, opener: str) -> str:
    return f"x = {Deep(depth, opener == '[').toml()}\n"


def textual(rng: random.Random, valid: str) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return valid.encode()[: rng.randrange(len(valid))]
    if kind == 1:
        raw = bytearray(valid.encode())
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    if kind == 2:
        return b"\xff\xfe" + valid.encode("utf-16-le")
    if kind == 3:
        return _deep_text(rng.choice([100, 5000]), rng.choice("[{")).encode()
    return ('[job]\nid = "x"\n' + "[job]\n" * rng.randint(1, 2)).encode()


def file_kinds(case: Path, index: int) -> Path:
    """Files of the wrong kind where the spec expects a file or a folder."""
    data = valid_spec(case)
    spec = case / "job.toml"
    variant = index % 12
    if variant >= 6:  # a symlink loop in each path field
        (case / "loop").symlink_to(case / "loop")
        loop = str(case / "loop")
        if variant == 6:
            data["job"]["repo"] = loop
        elif variant == 7:
            data["steps"][0]["log"] = "loop"
        elif variant == 8:
            data["steps"][0]["junit"] = "loop"
        elif variant == 9:
            data["proposer"]["dir"] = "loop"
        elif variant == 10:
            data["proposer"] = {"kind": "patchfiles", "paths": ["loop"]}
        else:
            data["job"]["harness"] = loop
    elif variant == 0:
        os.mkfifo(case / "patches" / "02-fifo.patch")
    elif variant == 1:
        (case / "patches" / "03-dir.patch").mkdir()
    elif variant == 2:
        (case / "ci.log").unlink()
        os.mkfifo(case / "ci.log")
    elif variant == 3:
        data["proposer"] = {"kind": "patchfiles", "paths": ["/dev/zero"]}
    elif variant == 4:
        os.mkfifo(spec)
        return spec
    else:
        spec.mkdir()
        return spec
    spec.write_text(to_toml(data))
    return spec


def cases(root: Path, count: int, seed: int = 16) -> Iterator[tuple[str, Path]]:
    rng = random.Random(seed)
    for index in range(count):
        case = root / f"case{index:04d}"
        case.mkdir()
        spec = case / "job.toml"
        kind = index % 10
        if kind < 7:
            spec.write_text(to_toml(structural(rng, case)))
        elif kind < 9 and index % 20 == 18:
            spec.write_text(to_toml(workflow_kinds(case, index // 20)))
        elif kind < 9:
            spec.write_bytes(textual(rng, to_toml(valid_spec(case))))
        else:
            spec = file_kinds(case, index // 10)
        yield f"case{index:04d}", spec
