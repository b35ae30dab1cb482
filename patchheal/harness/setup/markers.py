"""PEP 508 environment markers evaluated for the image's Python, not the host's.

The marker variables of the image's CPython on Linux; requirements kept
(markers dropped) when they hold there; and, from a wheel's METADATA, the
requirements the image's Python needs that the host's pip, which evaluates
markers for the host's interpreter, left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def target_environment(python: str) -> dict[str, str]:
    """PEP 508 marker variables of the image's CPython `python` ('3.9') on Linux."""
    from packaging.markers import default_environment

    return {
        **{key: str(value) for key, value in default_environment().items()},
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
    }


def for_python(requirements: Sequence[str], python: str | None) -> list[str]:
    """`requirements` whose markers hold for the image's Python `python` ('3.11'), markers
    dropped: on the host, pip would evaluate them for the host's interpreter instead."""
    if python is None:
        return list(requirements)
    from packaging.requirements import InvalidRequirement, Requirement

    environment = target_environment(python)
    kept: list[str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            kept.append(text)  # pip names what is wrong with it
            continue
        if requirement.marker is None or requirement.marker.evaluate(environment):
            requirement.marker = None
            kept.append(str(requirement))
    return kept


def only_for_target(metadata_text: str, python: str) -> list[str]:
    """The requirements of a wheel's METADATA that the image's Python needs and the host's
    pip left out: their markers hold for `python` but not for the host (`tomli;
    python_version < "3.11"` of pytest 8, for 3.9 from a 3.11 host). Markers dropped."""
    from email.parser import HeaderParser

    from packaging.markers import default_environment
    from packaging.requirements import InvalidRequirement, Requirement

    target = {**target_environment(python), "extra": ""}
    host = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    wanted: list[str] = []
    for text in HeaderParser().parsestr(metadata_text).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if requirement.url:
            continue  # a direct reference is no name from an index (hostpip.py): never here
        if marker is not None and marker.evaluate(target) and not marker.evaluate(host):
            requirement.marker = None
            wanted.append(str(requirement))
    return wanted


def _wheel_metadata(wheel: Path) -> str:
    """A wheel's `*.dist-info/METADATA`, or '' (an sdist, a broken file)."""
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            return archive.read(names[0]).decode("utf-8", "replace") if names else ""
    except (OSError, zipfile.BadZipFile, KeyError):
        return ""
