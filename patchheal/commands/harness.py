"""`patchheal harness list|build|check|run|explain`: see exactly what a step sees."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from patchheal.commands.harness_explain import explain
from patchheal.harness.engine import containers, dockerapi

if TYPE_CHECKING:
    from patchheal.commands.progress import Progress
    from patchheal.harness.config import HarnessDef


def _say(message: str) -> None:
    click.echo(message, err=True)


def _progress(what: str) -> Progress:
    """Messages on stderr and, after 2 s of silence (an image build, a wheelhouse
    download, a container starting), a line saying what it waits on; honours -q."""
    from patchheal.commands.options import verbosity
    from patchheal.commands.progress import Progress

    return Progress(f"harness {what}", verbosity=verbosity())


@click.group()
def harness() -> None:
    """List, build, check and run harnesses."""


harness.add_command(explain)


@harness.command("list")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also list the repository's own harnesses/ folder.",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def list_(repo: Path | None, as_json: bool) -> None:
    """List the harness definitions on the search path."""
    import json

    from patchheal.harness.definitions import harness_search_path, list_harnesses

    if as_json:
        click.echo(json.dumps({"name": "local", "kind": "local", "path": None}))
        for defn in list_harnesses(repo):
            row = {"name": defn.name, "kind": defn.kind, "path": str(defn.path)}
            click.echo(json.dumps({**row, "description": defn.description}))
        return
    click.echo(f"{'local':<12} {'local':<8} host process in the worktree, no isolation")
    for defn in list_harnesses(repo):
        click.echo(f"{defn.name:<12} {defn.kind:<8} {defn.description}  [{defn.path}]")
    click.echo("search path: " + ", ".join(str(p) for p in harness_search_path(repo)), err=True)


@harness.command("build")
@click.argument("name")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--rebuild-from-scratch",
    is_flag=True,
    help="Prove the offline build path: build under a throwaway tag ignoring every cache, "
    "health-check it, then remove it (the cached image is left alone).",
)
@click.option(
    "--python",
    default=None,
    help="One of the harness's [pythons] (e.g. 3.9); without it, --repo's, as `heal` infers.",
)
@click.option("--node", default=None, help="One of the harness's [nodes] (e.g. 20).")
def build(
    name: str, repo: Path | None, rebuild_from_scratch: bool, python: str | None, node: str | None
) -> None:
    """Build NAME's image if it is missing (offline when no registry answers)."""
    import time

    from patchheal.harness.definitions import load_harness
    from patchheal.harness.images import build as images

    defn = load_harness(name, repo)
    if defn.kind == "compose" and defn.compose is not None:
        defn = load_harness(defn.compose.base, repo)
    defn = with_runtimes(defn, repo, "HEAD", (python, node), None)
    client = dockerapi.engine()
    started = time.monotonic()
    with _progress(f"build {defn.name}") as progress:
        tag = images.ensure_image(client, defn, say=progress.say, from_scratch=rebuild_from_scratch)
    took = time.monotonic() - started
    if rebuild_from_scratch:
        containers.remove_image(client, tag)
        click.echo(f"built {tag} from scratch in {took:.1f} s, health-checked, removed")
    else:
        click.echo(f"{tag} ({took:.1f} s)")


@harness.command("check")
@click.argument("name")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=None)
def check(name: str, repo: Path | None) -> None:
    """Build NAME if needed, run a trivial command in its sandbox, report engine and image."""
    import tempfile

    from patchheal.harness import definitions, registry

    defn = definitions.load_harness(name, repo)
    client = dockerapi.engine()
    version = client.version()
    click.echo(f"engine: Docker {version.get('Version')} (API {version.get('ApiVersion')})")
    progress = _progress(f"check {defn.name}")
    runner = registry.build(defn, job_id=f"check-{os.getpid()}", say=progress.say, repo=repo)
    try:
        with progress, tempfile.TemporaryDirectory(prefix="patchheal-check-") as tmp:
            if defn.kind == "compose":
                Path(tmp, "compose.yaml").write_text("services:\n  idle:\n    command: sleep 60\n")
            result = runner.run("id -u && uname -sr", Path(tmp), timeout=120, idle_timeout=120)
        docker_harness: Any = getattr(runner, "base", runner)  # compose wraps a Docker harness
        image = docker_harness.image()
    finally:
        runner.close()
    click.echo(f"image: {image}")
    click.echo(
        f"harness: {runner.name}; trivial command exit {result.exit_code} "
        f"in {result.duration_seconds:.2f} s: {' '.join(result.output.split())}"
    )
    if not result.passed:
        raise SystemExit(3)


@harness.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="Git repository to run over (a fresh worktree of it).",
)
@click.option("--ref", default="HEAD", show_default=True, help="Commit the worktree starts at.")
@click.option("--setup", multiple=True, help="Job setup command (as [job] setup).")
@click.option("--env", "env_names", multiple=True, help="Variable passed through by name.")
@click.option("--timeout", default=900.0, show_default=True, help="Wall-clock seconds.")
@click.option("--idle-timeout", default=300.0, show_default=True, help="Seconds without output.")
@click.option("--keep", is_flag=True, help="Keep the worktree and print its path.")
@click.option(
    "--python",
    default=None,
    help="One of the harness's [pythons] (e.g. 3.9); without it, inferred as `heal` does.",
)
@click.option("--node", default=None, help="One of the harness's [nodes]; else inferred.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    name: str,
    repo: Path,
    ref: str,
    setup: tuple[str, ...],
    env_names: tuple[str, ...],
    timeout: float,
    idle_timeout: float,
    keep: bool,
    python: str | None,
    node: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in harness NAME over a fresh worktree of --repo; exit with its exit code."""
    import shlex

    from patchheal.harness import definitions, registry
    from patchheal.harness.engine import orphans
    from patchheal.harness.local.harness import LocalHarness
    from patchheal.workspace.worktrees import JobWorkspace

    text = command[0] if len(command) == 1 else shlex.join(command)
    # A report names its harness as the runner shows it (`docker:python`): the same harness.
    kind, _, bare = name.partition(":")
    name = bare if bare and kind in {"docker", "compose"} else name
    progress = _progress(f"run {name}")
    # Bad input is refused before anything is created: an unknown harness used to leave
    # its harness-run-* workspace behind under the worktree root.
    defn = None if name == "local" else definitions.load_harness(name, repo)
    if defn is not None:
        # The Python (and Node) `heal` would run this job on: the repository's at --ref.
        defn = with_runtimes(defn, repo, ref, (python, node), text, progress.say)
    workspace = JobWorkspace(repo.resolve(), ref, f"harness-run-{os.getpid()}")
    runner: Any = None

    def stream(chunk: bytes) -> None:
        progress.touch()  # the command's own output is a sign of life: no waiting line
        _stream(chunk)

    try:
        workspace.open()
        orphans.write_owner(workspace.dir)
        runner = (
            LocalHarness(setup=setup, env_passthrough=env_names)
            if defn is None
            else registry.build(
                defn,
                job_id=workspace.job_id,
                setup=setup,
                passthrough=env_names,
                say=progress.say,
                repo=repo,
            )
        )
        with progress:
            tree = workspace.worktree("run")
            progress.say(
                f"{runner.name}: {text}  (worktree {tree} at {workspace.base_commit[:12]})"
            )
            runner.prepare(tree)
            progress.say("running")
            result = runner.run(
                text, tree, timeout=timeout, idle_timeout=idle_timeout, on_output=stream
            )
    finally:
        if runner is not None:
            runner.close()
        if keep:
            _say(f"worktree kept: {workspace.dir}")
        else:
            workspace.destroy()
    if result.timed_out:
        _say(f"killed: {result.timed_out} timeout")
    if result.oom_killed:
        _say("killed: out of memory")
    sys.exit(124 if result.exit_code is None else result.exit_code)


def with_runtimes(
    defn: HarnessDef,
    repo: Path | None,
    ref: str,
    given: tuple[str | None, str | None],
    command: str | None,
    say: Callable[[str], None] = _say,
) -> HarnessDef:
    """`defn` with the Python and Node a `--python`/`--node` names, else those the repository
    at `ref` says, chosen as `heal` chooses them (`pythons.choose`), and the sentence why."""
    from patchheal.errors import SpecError
    from patchheal.harness.inference import nodes, pythons, runtimes

    for runtime, wanted in zip((pythons.PYTHON, nodes.NODE), given, strict=True):
        if wanted is None:
            continue
        version = runtime.parse(wanted)
        if version is None:  # bad input: a clear error (exit 2), not a crash in nearest()
            raise SpecError(
                f"--{runtime.field} {wanted!r} is not a version like {runtime.example!r}"
            )
        defn = runtimes.with_version(runtime, defn, version, f"--{runtime.field} {wanted}")
    if repo is None:
        return defn
    python, node = given
    if python is None:
        defn, why = pythons.choose(defn, repo, ref, None, command=command)
        if why:
            say(f"python: {why}")
    if node is None:
        defn, why = nodes.choose(defn, repo, ref, None)
        if why:
            say(f"node: {why}")
    return defn


def _stream(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
