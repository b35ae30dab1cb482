"""HarnessDef: the typed form of `harnesses/<name>/harness.toml`.

A harness definition says where a step runs: how its image is obtained (a
registry reference, a Dockerfile, or Debian packages for the offline build),
how dependencies are installed, and the sandbox the step runs in (each of
those tables: `tables.py`). Loading a definition never touches the Docker
engine.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from patchheal.errors import SpecError, validation_problems
from patchheal.harness.tables import ComposeSpec, DepsSpec, ImageSpec, SandboxSpec, _Def

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


class HarnessDef(_Def):
    """One harness definition (`harness.toml`)."""

    name: str = Field(description="lower-case name, used in job specs and image tags")
    kind: Literal["docker", "compose"] = Field("docker", description="which harness runs it")
    description: str = Field("", description="one line shown by `patchheal harness list`")
    image: ImageSpec = Field(
        default_factory=lambda: ImageSpec.model_validate({}),
        description="where the image comes from",
    )
    deps: DepsSpec = Field(
        default_factory=lambda: DepsSpec.model_validate({}), description="dependency installation"
    )
    sandbox: SandboxSpec = Field(
        default_factory=lambda: SandboxSpec.model_validate({}),
        description="container limits and policy",
    )
    compose: ComposeSpec | None = Field(None, description="services (kind = 'compose' only)")
    setup: tuple[str, ...] = Field(
        (), description="commands run once per dependency fingerprint, before the job's setup"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="fixed variables; override the deterministic ones"
    )
    regression: tuple[str, ...] = Field(
        (),
        description="regression steps every job on this harness gets after its own "
        "[regression] command (measured at reproduction, must not get worse), e.g. the "
        "airflow harness's DAG parse check; a job turns them off with [regression] harness = false",
    )
    env_passthrough: tuple[str, ...] = Field(
        (), description="host variables passed through by name"
    )
    pythons: dict[str, str] = Field(
        default_factory=dict,
        description="Python version ('3.9') -> the Debian suite whose python3 it is "
        "('bullseye'): the Pythons a job may choose (`[job] python`), each image built "
        "offline from its suite; the one of [image] suite is the default",
    )
    nodes: dict[str, str] = Field(
        default_factory=dict,
        description="Node major ('20') -> the Debian suite whose nodejs it is ('trixie'): "
        "the Nodes a job may choose (`[job] node`), as `pythons` for Python",
    )
    path: Path | None = Field(None, exclude=True, description="the folder it was loaded from")

    @field_validator("name")
    @classmethod
    def _name_form(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be lower-case letters, digits, '.', '_' or '-' (max 64)")
        return value

    @field_validator("pythons")
    @classmethod
    def _pythons_form(cls, value: dict[str, str]) -> dict[str, str]:
        return _runtime_table(value, r"3\.\d{1,2}", "3.N")

    @field_validator("nodes")
    @classmethod
    def _nodes_form(cls, value: dict[str, str]) -> dict[str, str]:
        return _runtime_table(value, r"\d{1,3}", "N (a major)")

    @model_validator(mode="after")
    def _kind_matches_sections(self) -> HarnessDef:
        if self.kind == "compose" and self.compose is None:
            raise ValueError("kind = 'compose' needs a [compose] table")
        if self.kind == "docker" and self.compose is not None:
            raise ValueError("a [compose] table needs kind = 'compose'")
        if self.kind == "docker" and not (
            self.image.ref or self.image.packages or self.image.dockerfile or self.image.harness
        ):
            raise ValueError(
                "kind = 'docker' needs [image] ref, packages, harness or dockerfile to build from"
            )
        if self.image.harness and (self.image.ref or self.image.packages):
            raise ValueError("[image] harness replaces ref and packages: give one or the other")
        if self.image.harness == self.name:
            raise ValueError(f"[image] harness names this harness itself ({self.name!r})")
        if (
            self.image.dockerfile
            and self.path
            and not (self.path / self.image.dockerfile).is_file()
        ):
            raise ValueError(f"[image] dockerfile {self.image.dockerfile!r} is not in {self.path}")
        return self

    @property
    def dockerfile_path(self) -> Path | None:
        if self.image.dockerfile is None or self.path is None:
            return None
        return self.path / self.image.dockerfile


def load_harness_file(path: Path) -> HarnessDef:
    """Read and validate one harness.toml; errors name the file and the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read harness definition {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"harness definition {path} is not valid TOML: {exc}") from None
    data.setdefault("name", path.parent.name)
    data["path"] = path.parent.resolve()
    try:
        return HarnessDef.model_validate(data)
    except ValidationError as exc:
        lines = [f"invalid harness definition {path}:", *validation_problems(exc)]
        raise SpecError("\n  ".join(lines)) from None


def _runtime_table(value: dict[str, str], version_form: str, shown: str) -> dict[str, str]:
    """A `[pythons]`/`[nodes]` table: each version in its form -> a Debian suite name."""
    for version, suite in value.items():
        if not re.fullmatch(version_form, version) or not re.fullmatch(r"[a-z][a-z0-9-]*", suite):
            raise ValueError(f"{version!r} = {suite!r}: want '{shown}' = 'debian-suite'")
    return value
