"""What of the user's history a job's private repository holds: the base commit, nothing more.

The private repository used to fetch the base commit with all its ancestors.
That made every job pay for the whole history (seconds on a long one), and it
failed on the repositories CI hands us: a shallow clone refuses to update a
shallow root (the fetch exits 0 and creates no ref), and a partial clone's
`upload-pack` runs with lazy fetching disabled, so a missing blob aborts it
with a raw "git upload-pack: aborting due to possible repository corruption".

Instead, `git pack-objects` runs in the user's repository with the base as a
shallow boundary (`--shallow <sha>`, what `upload-pack` does for a depth-1
fetch) and writes its pack straight into the private repository, whose
`shallow` file then grafts the base as a root. The copied commit keeps its
real sha and parents, so a commit made on top of it and published back to the
user's repository sits on the user's real base commit. In a partial clone,
`pack-objects` (unlike `upload-pack`) fetches blobs of the base tree that are
missing from the promisor remote, as a checkout of that commit would.
"""

from __future__ import annotations

from pathlib import Path

from patchheal import proc
from patchheal.errors import BadInput


class BaseNotCopyable(BadInput):
    """The user's repository lacks objects of the base commit and cannot get them."""


# Copying a very large tree is bounded by this, not by the helper's default.
_COPY_TIMEOUT = 1800.0


def copy_base_commit(repo: Path, sha: str, private: Path) -> None:
    """Put commit `sha` of `repo` and its whole tree into the bare repository
    `private` as a depth-1 (grafted) commit; `private` gets no ref here."""
    pack_prefix = private / "objects" / "pack" / "pack"
    pack_prefix.parent.mkdir(parents=True, exist_ok=True)
    result = proc.git(
        "pack-objects",
        "--revs",
        "--quiet",
        str(pack_prefix),
        cwd=repo,
        check=False,
        stdin=f"{sha}\n--shallow {sha}\n".encode("ascii"),
        timeout=_COPY_TIMEOUT,
    )
    if result.exit_code != 0:
        why = "\n".join(result.output.strip().splitlines()[-3:])
        raise BaseNotCopyable(
            f"cannot copy base commit {sha[:12]} out of {repo}: some of its objects are "
            f"missing and could not be fetched (a partial clone whose remote is "
            f"unreachable?); check out that commit in {repo} once, then retry.\n{why}"
        )
    (private / "shallow").write_text(f"{sha}\n", encoding="ascii")
