"""What a harness image is made from: its recipe, the recipe's hash and the image's tag.

The tag is a hash of everything that builds the image (the [image] table, the
recipe of the harness it is based on, and every file beside harness.toml when
it has a Dockerfile), so an edited recipe gives a new tag and an unchanged one
is never rebuilt; a job's Debian packages (`with_packages`) are part of the
recipe too. Computing a tag never touches the Docker engine; `build.py` builds
the image a tag names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from patchheal.errors import ImageBuildError, SpecError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine.ownership import REPOSITORY
from patchheal.harness.tables import check_debian_package

BUILDER_VERSION = "2"  # 2: the standard library's bytecode (engine/bytecode.py)


def recipe_hash(defn: HarnessDef, _chain: tuple[str, ...] = ()) -> str:
    """A hash of everything that builds the image."""
    digest = hashlib.sha256()
    recipe = defn.image.model_dump(mode="json")
    recipe["packages"] = sorted(defn.image.packages)
    recipe["extra_packages"] = sorted(set(defn.image.extra_packages))
    # Keys added later are left out while unset, so existing images keep their tags.
    for key in ("harness", "extra_packages"):
        if not recipe.get(key):
            recipe.pop(key, None)
    digest.update(json.dumps([BUILDER_VERSION, recipe], sort_keys=True).encode())
    if defn.image.harness:
        # A rebuilt base harness must give this one a new tag too.
        if defn.name in _chain:
            raise ImageBuildError(f"[image] harness loops: {' → '.join([*_chain, defn.name])}")
        digest.update(recipe_hash(_base_harness(defn), (*_chain, defn.name)).encode())
    if defn.image.dockerfile and defn.path is not None:
        for path in sorted(p for p in defn.path.rglob("*") if p.is_file()):
            if path.name != "harness.toml":
                digest.update(str(path.relative_to(defn.path)).encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _base_harness(defn: HarnessDef) -> HarnessDef:
    from patchheal.harness.definitions import load_harness

    assert defn.image.harness is not None
    # Looked up from the folder the definition lives in, so a repository's own
    # harnesses/ can base one harness on another.
    repo = defn.path.parent.parent if defn.path is not None else None
    # A job's packages go into the Debian base the chain starts from.
    return with_packages(load_harness(defn.image.harness, repo), defn.image.extra_packages)


def with_packages(defn: HarnessDef, packages: Sequence[str]) -> HarnessDef:
    """`defn` with a job's Debian `packages` added to its image (`[job] packages`): an image
    of its own, built offline from Debian's packages like the base, tagged by the sorted
    list with the rest of the recipe, so the same list reuses it."""
    if not packages:
        return defn
    if defn.kind != "docker":
        raise SpecError(
            f"[job] packages: harness {defn.name!r} is a {defn.kind} harness; job packages go "
            "into a docker harness's image (its [compose] base harness's, in its definition)"
        )
    for name in packages:
        try:
            check_debian_package(name)
        except ValueError as exc:
            raise SpecError(f"[job] packages: {exc}") from None
    wanted = tuple(sorted({*defn.image.extra_packages, *packages}))
    return defn.model_copy(
        update={"image": defn.image.model_copy(update={"extra_packages": wanted})}
    )


def image_tag(defn: HarnessDef) -> str:
    return f"{REPOSITORY}/{defn.name}:{recipe_hash(defn)[:16]}"
