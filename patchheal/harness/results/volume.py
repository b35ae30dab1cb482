"""A sandbox session's results directory lives in its container, capped (issue 25, H3).

The collectors of a Docker run report in a per-run directory the step can
write too. It used to be a host directory bind-mounted into the container:
a step could fill the host's TMPDIR with GiBs, outside every limit of the
container. It is now a tmpfs volume of the container (an anonymous volume
of the `local` driver, so the engine's archive API can read it, which it
cannot for a `--tmpfs` mount; removed with the container), capped in bytes
(`results_size`) and inodes. Its pages are charged to the container's memory
cgroup: it lives inside the container's limits, never on the host's disk.

- Every run's exec empties the volume of the previous run's results before
  the step starts (`PRELUDE`, as the step's user; the volume's root is 1777
  like /tmp) and makes the run's own `results-<nonce>` directory.
- After the run (and its sweep: no process of it is left to write), `collect`
  reads the volume through the engine's tar stream with `tarreader.read_tar`:
  regular files of the run's directory only, under the channel's budget.
- A volume that is full (its byte or inode cap reached) rejects the run with
  that reason: the collectors' own writes may have been cut off. So does
  anything the step left outside its run's directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from patchheal.harness.results import tarreader, untrusted

if TYPE_CHECKING:
    from docker.models.containers import Container

ROOT = "/run/patchheal"
INODES = 4096
_PAGE = 4096
# Tar overhead per member (header, a pax header for a long name, padding) is at most
# a few blocks; the stream is cut past this much more than the volume can hold.
_TAR_SLACK = INODES * 4 * 512 + (1 << 20)

PRELUDE = (
    f'for entry in {ROOT}/* {ROOT}/.[!.]* {ROOT}/..?*; do [ -e "$entry" ] || continue; '
    '[ -d "$entry" ] && [ ! -L "$entry" ] && chmod -R u+rwx "$entry"; rm -rf "$entry"; '
    'done 2>/dev/null; mkdir -m 0700 "$PATCHHEAL_RESULTS_DIR" 2>/dev/null'
)
"""Shell run before each step (after the scrub): the previous run's results are gone,
this run's directory exists. `$PATCHHEAL_RESULTS_DIR` is the run's (results.DIR_ENV)."""


def run_dir(nonce: str) -> str:
    return f"{ROOT}/results-{nonce}"


def tmpfs_options(size: int) -> dict[str, str]:
    """The `local` driver's options of a tmpfs of `size` bytes: not executable, no devices."""
    options = f"size={size},nr_inodes={INODES},mode=1777,nosuid,nodev,noexec"
    return {"type": "tmpfs", "device": "tmpfs", "o": options}


def mount(size: int, source: str | None = None) -> Any:
    """The volume mount at ROOT: an anonymous tmpfs of `size` bytes (a session's), or the
    named volume `source` (a compose step's, made with `tmpfs_options`)."""
    from docker.types import DriverConfig, Mount

    if source is not None:
        return Mount(target=ROOT, source=source, type="volume")
    config = DriverConfig("local", tmpfs_options(size))
    return Mount(target=ROOT, source=None, type="volume", driver_config=config)


def collect(
    container: Container, nonce: str, size: int, budget: untrusted.Budget
) -> list[untrusted.Entry]:
    """The run's results files as entries (read or refused), plus a refusal for a full
    volume and for each thing left outside the run's directory."""
    import docker.errors

    mine = f"results-{nonce}"

    def in_mine(path: str) -> str:
        """The name of a file directly in the run's directory, else ''."""
        top, _, rest = path.partition("/")
        return rest if top == mine and "/" not in rest else ""

    try:
        chunks, _ = container.get_archive(ROOT, chunk_size=1 << 20)
    except docker.errors.APIError as exc:
        return [untrusted.Entry(".", refused=f"cannot read the results volume: {exc}")]
    # Files directly in the run's directory are read; deeper ones sit in a refused directory.
    members, cut = tarreader.read_tar(
        chunks, budget, cap=size + _TAR_SLACK, wanted=lambda path: bool(in_mine(path))
    )
    entries: list[untrusted.Entry] = []
    used = sum(-(-m.size // _PAGE) * _PAGE for m in members)
    if cut or used + _PAGE > size or len(members) >= INODES - 1:
        why = cut or f"{used} bytes in {len(members)} entries"
        entries.append(
            untrusted.Entry(
                ".",
                refused=f"the results directory reached its cap of {size} bytes / {INODES} "
                f"entries ({why}): writes there were cut off",
            )
        )
    for m in members:
        if name := in_mine(m.path):
            entries.append(untrusted.Entry(name, m.entry.data, m.entry.refused))
        elif m.path and "/" not in m.path and m.path != mine:
            entries.append(untrusted.Entry(m.path, refused="outside the run's results directory"))
    return entries
