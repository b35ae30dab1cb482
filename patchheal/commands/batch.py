"""`patchheal batch`: heal several job specs in one process, one after another.

For more than one machine, run `patchheal batch --shard I/N` on N workers of
an existing engine (a CI matrix, Kubernetes Jobs, Ray, GNU parallel over ssh)
against one shared store URL: each worker takes the specs whose name hashes
to its shard, so no queue of our own is needed.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import click

from patchheal.commands.options import StateArgs, state_options


def in_shard(path: Path, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    index, total = shard
    digest = int(hashlib.sha256(path.name.encode()).hexdigest(), 16)
    return digest % total == index


def parse_shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    left, _, right = value.partition("/")
    if not (left.isdigit() and right.isdigit()) or not 0 <= int(left) < int(right):
        raise click.BadParameter(
            f"expected I/N with 0 <= I < N, got {value!r}", param_hint="--shard"
        )
    return int(left), int(right)


@click.command()
@click.argument(
    "job_files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option("--shard", default=None, metavar="I/N", help="take only shard I of N (0-based)")
@state_options
def batch(
    job_files: tuple[Path, ...],
    shard: str | None,
    state: StateArgs,
) -> None:
    """Heal each JOB_FILE in turn. Exits 0 when all are fixed, else the worst code."""
    from patchheal.commands.heal import run_heal
    from patchheal.config import load_spec
    from patchheal.errors import EXIT_INFRA, PatchhealError
    from patchheal.intake.toml import spec_to_toml

    chosen = [p for p in sorted(job_files) if in_shard(p, parse_shard(shard))]
    codes: list[int] = []
    for path in chosen:
        try:
            spec = load_spec(path)
            codes.append(run_heal(spec, spec_to_toml(spec), state, json_lines=True))
        except PatchhealError as exc:
            click.echo(f"{path}: {exc}", err=True)
            codes.append(exc.exit_code)
            if exc.exit_code == EXIT_INFRA:
                break
    click.echo(f"batch: {sum(1 for c in codes if c == 0)} fixed of {len(chosen)} job(s)", err=True)
    sys.exit(max(codes, default=0))
