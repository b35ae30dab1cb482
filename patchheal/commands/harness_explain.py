"""`patchheal harness explain`: which harness a job gets, and why (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.command("explain")
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The job's repository.",
)
@click.option("--base", default="HEAD", show_default=True, help="The commit that fails.")
@click.option("--last-green", default=None, help="The last passing commit (changed files).")
@click.option("--harness", "wanted", default="auto", show_default=True, help="As [job] harness.")
@click.option("--python", "python", default=None, help="As [job] python (e.g. 3.9).")
@click.option("--node", "node", default=None, help="As [job] node (e.g. 20).")
@click.option(
    "--command",
    "command",
    default=None,
    help="The failing step's command: the CI workflow job that runs it chooses the Python.",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object")
def explain(
    repo: Path,
    base: str,
    last_green: str | None,
    wanted: str,
    python: str | None,
    node: str | None,
    command: str | None,
    as_json: bool,
) -> None:
    """Show which harness a job on --repo at --base gets, and why (no engine needed)."""
    choice = _choice(repo, base, last_green, wanted, (python, node), command)
    if choice["kind"] != "local":
        choice["run"] = _run_line(repo, base, choice, command)
    if as_json:
        click.echo(json.dumps(choice, ensure_ascii=False))
        return
    if choice["kind"] == "local":
        click.echo(f"harness: local — {choice['reason']}")
        return
    click.echo(f"harness: {choice['harness']} ({choice['kind']}) — {choice['reason']}")
    click.echo(f"definition: {choice['definition']}")
    compose = choice.get("compose")
    if compose is not None:
        if compose["file"] is None:
            click.echo("compose file: none found")
        else:
            click.echo(f"compose file: {compose['file']}")
            for service in compose["services"]:
                click.echo(f"  {service['name']}: {service['served_by']}")
        click.echo(f"step runs in: {choice['step_runs_in']}")
    if choice.get("python"):
        click.echo(f"python: {choice['python']} (offered: {', '.join(choice['pythons'])})")
    if choice.get("node"):
        click.echo(f"node: {choice['node']} (offered: {', '.join(choice['nodes'])})")
    click.echo(f"image: {choice['image']} (built offline when the engine lacks it)")
    click.echo(f"run it: {choice['run']}")


def _run_line(repo: Path, base: str, choice: dict[str, Any], command: str | None) -> str:
    """The `harness run` that runs a step as the job would, on the chosen Python and Node."""
    import shlex

    # A compose harness takes no --python: its step runs on its base harness's default.
    keys = () if "compose" in choice else ("python", "node")
    options = [f"--{key} {shlex.quote(choice[key + '_version'])}" for key in keys
               if choice.get(key + "_version")]  # fmt: skip
    return " ".join(
        [
            f"patchheal harness run {shlex.quote(choice['harness'])}",
            *options,
            f"--repo {shlex.quote(str(repo))} --ref {shlex.quote(base)}",
            f"-- sh -c {shlex.quote(command)}" if command else "-- COMMAND",
        ]
    )


def _check_base(repo: Path, base: str) -> None:
    """A base that is not a commit of a git repository is bad input, as it is for `heal`
    (an explanation of another commit's files would be wrong without saying so)."""
    from patchheal import proc
    from patchheal.errors import NotAGitRepository, UnknownRef

    inside = proc.git("rev-parse", "--is-inside-work-tree", cwd=repo, check=False)
    if not inside.passed:
        if base != "HEAD":
            raise NotAGitRepository(
                f"{repo.resolve()} is not a git repository, so --base {base} is unknown"
            )
        return  # a plain directory: its files are explained as they are
    found = proc.git(
        "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", cwd=repo, check=False
    )
    if not found.passed:
        raise UnknownRef(f"base ref {base!r} does not resolve to a commit in {repo.resolve()}")


def _choice(
    repo: Path,
    base: str,
    last_green: str | None,
    wanted: str,
    runtimes: tuple[str | None, str | None],
    command: str | None = None,
) -> dict[str, Any]:
    from patchheal.harness import definitions, registry
    from patchheal.harness.images import recipe
    from patchheal.harness.inference import nodes, pythons

    if wanted == "local":
        return {"harness": "local", "kind": "local", "reason": "the job names harness = 'local'"}
    _check_base(repo, base)
    if last_green is not None:
        _check_base(repo, last_green)
    if wanted == "auto":
        name, why = registry.infer(repo, base, last_green)
    else:
        name, why = wanted, f"the job names harness = {wanted!r}"
    defn = definitions.load_harness(name, repo)
    choice: dict[str, Any] = {
        "harness": defn.name,
        "kind": defn.kind,
        "reason": why,
        "definition": str(defn.path),
    }
    if defn.compose is not None:
        choice["compose"] = _services(repo, base, defn)
        defn = definitions.load_harness(defn.compose.base, repo)
        choice["step_runs_in"] = defn.name
    python, node = runtimes
    defn, chosen = pythons.choose(defn, repo, base, python, command=command)
    if chosen:
        choice["python"] = chosen
        choice["python_version"] = pythons.of(defn)
        choice["pythons"] = list(pythons.offered(defn))
    defn, chosen = nodes.choose(defn, repo, base, node)
    if chosen:
        choice["node"] = chosen
        choice["node_version"] = next(
            (v for v, suite in defn.nodes.items() if suite == defn.image.suite), None
        )
        choice["nodes"] = list(nodes.offered(defn))
    choice["image"] = recipe.image_tag(defn)
    return choice


def _services(repo: Path, base: str, defn: Any) -> dict[str, Any]:
    """The compose file and, for each service, what serves it offline."""
    import tempfile

    from patchheal import proc
    from patchheal.harness.compose import file as composefile
    from patchheal.harness.images import services

    names = (defn.compose.file, *composefile.COMPOSE_FILES) if defn.compose.file else ()
    for name in names or composefile.COMPOSE_FILES:
        shown = proc.git("show", f"{base}:{name}", cwd=repo, check=False)
        text = shown.output if shown.passed else None
        if text is None and (repo / name).is_file():
            text = (repo / name).read_text(encoding="utf-8")
        if text is None:
            continue
        with tempfile.TemporaryDirectory(prefix="patchheal-explain-") as tmp:
            path = Path(tmp) / "compose.yaml"
            path.write_text(text, encoding="utf-8")
            parsed = composefile.load(path)
        rows = []
        for service in parsed.values():
            if service.name == defn.compose.service:
                served = "the step"
            elif service.harness or service.image is None:
                served = f"harness {service.harness or defn.compose.base}"
            else:
                mapped = services.lookup(service.image, defn.compose.images)
                target = f"offline harness {mapped.harness}" if mapped else "the engine only"
                served = f"{service.image} → {target} (when not in the engine)"
            rows.append({"name": service.name, "served_by": served})
        return {"file": name, "services": rows}
    return {"file": None, "services": []}
