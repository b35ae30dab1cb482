"""The subset of the compose file format the compose harness runs, parsed and checked.

Supported per service: `image`, `x-patchheal-harness` (the image of a
patchheal harness, built offline like any other), `command`, `entrypoint`,
`environment`, `healthcheck`, `depends_on`, `working_dir`, `user`, `tmpfs`,
`mem_limit` and named `volumes`. Keys that only matter outside a private
sandbox (`ports`, `restart`, `container_name`, `networks`, `labels`, ...)
are ignored; host bind mounts and `build` are refused with a clear message.
"""

from __future__ import annotations

import graphlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchheal.errors import SpecError

# The names a compose file may have in a repository's root, in the order they are looked for.
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")

_IGNORED = {
    "ports",
    "expose",
    "restart",
    "container_name",
    "networks",
    "labels",
    "logging",
    "stop_grace_period",
    "hostname",
    "init",
    "platform",
    "profiles",
    "deploy",
}
_SUPPORTED = {
    "image",
    "x-patchheal-harness",
    "command",
    "entrypoint",
    "environment",
    "healthcheck",
    "depends_on",
    "working_dir",
    "user",
    "tmpfs",
    "mem_limit",
    "volumes",
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_NS = {"us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}


@dataclass(frozen=True)
class Service:
    """One service of the compose file."""

    name: str
    image: str | None = None
    harness: str | None = None
    command: str | list[str] | None = None
    entrypoint: str | list[str] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    healthcheck: dict[str, Any] | None = None
    depends_on: tuple[str, ...] = ()
    working_dir: str | None = None
    user: str | None = None
    tmpfs: tuple[str, ...] = ()
    mem_limit: str | None = None
    volumes: tuple[tuple[str, str], ...] = ()


def duration_ns(value: object, where: str) -> int:
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise SpecError(f"{where}: {value!r} is not a duration like '1s' or '1m30s'")
    return int(sum(float(n) * _NS[u] for n, u in parts))


def load(path: Path) -> dict[str, Service]:
    """Services of a compose file, in dependency order (dependencies first)."""
    from patchheal.intake.yamlsafe import load_yaml_file

    return _services(path, load_yaml_file(path, "compose file"))  # bounded: depth, size, aliases


def problem_in(text: str, path: Path) -> str | None:
    """Why the compose file `path`, whose text is `text`, cannot be run by the compose
    harness (a `build:` service, a host bind mount, invalid YAML, ...); None when it can."""
    from patchheal.intake.yamlsafe import load_yaml_text

    try:
        _services(path, load_yaml_text(text, "compose file", path))
    except SpecError as exc:
        return str(exc)
    return None


def _services(path: Path, data: Any) -> dict[str, Service]:
    services = (data or {}).get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        raise SpecError(f"compose file {path} has no `services` mapping")
    parsed = {name: _service(path, str(name), body or {}) for name, body in services.items()}
    return {name: parsed[name] for name in _order(path, parsed)}


def _service(path: Path, name: str, body: dict[str, Any]) -> Service:
    where = f"{path}: services.{name}"
    if not isinstance(body, dict):
        raise SpecError(f"{where} must be a mapping")
    if "build" in body:
        raise SpecError(
            f"{where}.build is not supported (no registry, no network to build with); "
            "use `x-patchheal-harness: NAME` to run a patchheal harness image"
        )
    unknown = set(body) - _SUPPORTED - _IGNORED
    if unknown:
        raise SpecError(f"{where}: unsupported keys {sorted(unknown)}")
    env = body.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    depends = body.get("depends_on") or ()
    health = body.get("healthcheck")
    if health is not None:
        health = _healthcheck(where, health)
    tmpfs = body.get("tmpfs") or ()
    return Service(
        name=name,
        image=body.get("image"),
        harness=body.get("x-patchheal-harness"),
        command=body.get("command"),
        entrypoint=body.get("entrypoint"),
        environment={str(k): "" if v is None else str(v) for k, v in env.items()},
        healthcheck=health,
        depends_on=tuple(depends if isinstance(depends, list) else list(depends)),
        working_dir=body.get("working_dir"),
        user=None if body.get("user") is None else str(body["user"]),
        tmpfs=tuple([tmpfs] if isinstance(tmpfs, str) else tmpfs),
        mem_limit=None if body.get("mem_limit") is None else str(body["mem_limit"]),
        volumes=tuple(_volume(where, v) for v in body.get("volumes") or ()),
    )


def _healthcheck(where: str, health: dict[str, Any]) -> dict[str, Any]:
    test = health.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test:
        raise SpecError(f"{where}.healthcheck.test must be a string or a list")
    out: dict[str, Any] = {"test": test, "retries": int(health.get("retries", 30))}
    for key in ("interval", "timeout", "start_period"):
        if key in health:
            out[key] = duration_ns(health[key], f"{where}.healthcheck.{key}")
    out.setdefault("interval", duration_ns("1s", where))
    return out


def _volume(where: str, spec: object) -> tuple[str, str]:
    text = str(spec)
    source, _, target = text.partition(":")
    if not target or source.startswith((".", "/", "~")):
        raise SpecError(
            f"{where}.volumes: {text!r}: only named volumes (name:/path) are allowed; "
            "nothing of the host but the worktree is mounted"
        )
    return source, target.split(":")[0]


def _order(path: Path, services: dict[str, Service]) -> list[str]:
    """Dependencies first (graphlib: iterative, so a long `depends_on` chain in an
    untrusted compose file is ordered, not a RecursionError as the recursive sort was)."""
    for service in services.values():
        unknown = next((dep for dep in service.depends_on if dep not in services), None)
        if unknown is not None:
            raise SpecError(f"{path}: depends_on names the unknown service {unknown!r}")
    sorter = graphlib.TopologicalSorter({name: s.depends_on for name, s in services.items()})
    try:
        return list(sorter.static_order())
    except graphlib.CycleError as exc:
        cycle = " → ".join(str(name) for name in reversed(exc.args[1]))
        raise SpecError(f"{path}: depends_on has a cycle: {cycle}") from None
