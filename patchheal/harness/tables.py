"""The tables of a harness definition: `[image]`, `[sandbox]`, `[deps]` and `[compose]`.

The typed form of each table of `harnesses/<name>/harness.toml` (where the
harness image comes from, the container a step runs in, how the job's
dependencies are installed, the services a step runs beside), with the
validators of their fields (sizes, the sandbox user, Debian package names:
`check_debian_package`, also used for a job's `[job] packages`). Every table
forbids unknown keys and documents each field. `config.py`'s `HarnessDef`
holds one of each and loads a whole definition.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_SIZE = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)


class _Def(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageSpec(_Def):
    """The `[image]` table: where the harness image comes from, in order of preference."""

    ref: str | None = Field(
        None, description="registry reference (e.g. 'python:3.11-slim'), pulled when reachable"
    )
    harness: str | None = Field(
        None,
        description="another harness whose image is the base (its recipe is part of this "
        "one's hash), instead of ref/packages: e.g. dbt on top of python",
    )
    dockerfile: str | None = Field(
        None,
        description="Dockerfile beside harness.toml, built on top of the base "
        "(its `ARG BASE_IMAGE` / `FROM ${BASE_IMAGE}` receives the base image)",
    )
    packages: tuple[str, ...] = Field(
        (), description="Debian packages of the offline base image (mmdebstrap/debootstrap)"
    )
    extra_packages: tuple[str, ...] = Field(
        (),
        description="Debian packages a job adds (`[job] packages`): installed with `packages` "
        "into an image of their own, the sorted list part of its tag",
    )
    suite: str = Field("bookworm", description="Debian suite of the offline base image")
    mirror: str = Field("http://deb.debian.org/debian", description="Debian mirror for it")
    pull: Literal["auto", "always", "never"] = Field(
        "auto",
        description="'auto' pulls `ref` only when its registry resolves; 'never' builds offline",
    )
    check: str = Field(
        "true", description="health check run in a fresh container right after every build"
    )

    @field_validator("packages", "extra_packages")
    @classmethod
    def _debian_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            check_debian_package(name)
        return value


# Debian Policy 5.6.7: lower-case letters, digits, '+', '-', '.'; at least two characters,
# starting with a letter or digit.
DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def check_debian_package(name: str) -> str:
    """`name` if it is a Debian package name, else a ValueError saying the grammar."""
    if not DEBIAN_PACKAGE.match(name) or len(name) > 100:
        raise ValueError(
            f"{name!r} is not a Debian package name (lower-case letters, digits, '+', '-' "
            "and '.', at least two characters, starting with a letter or digit)"
        )
    return name


class SandboxSpec(_Def):
    """The `[sandbox]` table: the container a step runs in."""

    network: Literal["none", "bridge"] = Field(
        "none", description="network of step containers; 'none' leaves only loopback"
    )
    setup_network: Literal["none", "bridge"] = Field(
        "none",
        description="network of the dependency setup container; with 'none' pip installs "
        "come from a wheelhouse downloaded on the host",
    )
    user: str = Field(
        "auto",
        description="'auto' (the worktree owner, or 1000:1000 when root owns it) or 'UID[:GID]'",
    )
    workdir: str = Field("/workspace", description="where the worktree is mounted")
    cpus: float = Field(2.0, gt=0, description="CPU limit (cores)")
    memory: str = Field("2g", description="memory limit, e.g. '512m', '2g' (no swap beyond it)")
    process_memory: str = Field(
        "auto",
        description="one process's data limit (RLIMIT_DATA): 'auto' (7/8 of `memory`), a size, "
        "or 'off'; a runaway allocation then fails inside its process (MemoryError, ENOMEM) "
        "where the test that made it is named, instead of an OOM kill of the whole step",
    )
    pids: int = Field(1024, ge=16, description="process/thread limit")
    read_only: bool = Field(True, description="read-only root filesystem (tmpfs on /tmp)")
    tmpfs_size: str = Field("1g", description="size of the /tmp tmpfs")
    results_size: str = Field(
        "64m",
        description="size cap of the results directory, a tmpfs inside the container "
        "(a run that fills it is rejected)",
    )
    worktree_size: str = Field(
        "4g",
        description="how large the worktree (a host bind mount) may grow while a step runs, "
        "a size or 'off': watched every ~1.5 s, and past it the run is stopped with the "
        "limit as its reason (not a verdict on the code)",
    )

    @field_validator("worktree_size")
    @classmethod
    def _size_or_off(cls, value: str) -> str:
        if value != "off" and not _SIZE.match(value):
            raise ValueError(f"{value!r} is not 'off' or a size like '4g'")
        return value

    @field_validator("user")
    @classmethod
    def _user_form(cls, value: str) -> str:
        if value != "auto" and not re.fullmatch(r"\d+(:\d+)?", value):
            raise ValueError("must be 'auto' or a numeric 'UID[:GID]'")
        return value

    @field_validator("memory", "tmpfs_size", "results_size")
    @classmethod
    def _size_form(cls, value: str) -> str:
        if not _SIZE.match(value):
            raise ValueError(f"{value!r} is not a size like '512m' or '2g'")
        return value

    @field_validator("process_memory")
    @classmethod
    def _process_memory_form(cls, value: str) -> str:
        if value not in ("auto", "off") and not _SIZE.match(value):
            raise ValueError(f"{value!r} is not 'auto', 'off' or a size like '1536m'")
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or value == "/":
            raise ValueError("must be an absolute container path other than '/'")
        return value


class DepsSpec(_Def):
    """The `[deps]` table: how the job's dependencies are installed once per fingerprint."""

    kind: Literal["none", "pip", "npm"] = Field(
        "none", description="'pip' makes a venv and a host wheelhouse; 'npm' a host npm cache"
    )
    files: tuple[str, ...] = Field(
        (), description="extra globs (repo-relative) hashed into the dependency fingerprint"
    )
    image_files: dict[str, str] = Field(
        default_factory=dict,
        description="container path -> file beside harness.toml that the Dockerfile copies "
        "there (e.g. a constraints file): a `pip install` argument naming the container path "
        "is read from the harness folder when the host downloads the wheelhouse",
    )

    @field_validator("image_files")
    @classmethod
    def _image_files_form(cls, value: dict[str, str]) -> dict[str, str]:
        for container_path, local in value.items():
            if not container_path.startswith("/"):
                raise ValueError(f"{container_path!r} must be an absolute container path")
            if local.startswith("/") or ".." in Path(local).parts:
                raise ValueError(f"{local!r} must be a path inside the harness folder")
        return value


class ComposeSpec(_Def):
    """The `[compose]` table: a step that needs services."""

    file: str | None = Field(
        None,
        description="compose file: the repository's (compose.yaml, docker-compose.yml, ...) "
        "first, else this path beside harness.toml",
    )
    service: str = Field("step", description="the service the step runs in")
    base: str = Field("python", description="harness whose image and sandbox the step service uses")
    ready_timeout: float = Field(120.0, gt=0, description="seconds to wait for services")
    images: dict[str, str] = Field(
        default_factory=dict,
        description="image name (or glob, e.g. 'bitnami/*') -> harness serving it offline when "
        "the engine lacks it; adds to and overrides the defaults ('none' removes one)",
    )
