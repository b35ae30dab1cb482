"""Root filesystem tarballs for offline images: Debian packages, or the host runtime.

No registry is needed: mmdebstrap (or debootstrap) assembles a root filesystem
from Debian's package mirror, which air-gapped sites usually mirror anyway.
When neither can run, the last resort is an almost empty root whose /usr is
the host's, mounted read-only when a container starts.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from patchheal import proc
from patchheal.errors import ImageBuildError
from patchheal.harness.engine import bytecode
from patchheal.harness.engine.sandbox import SANDBOX_UID

Say = Callable[[str], None]

_USER_LINES = (
    f"patchheal:x:{SANDBOX_UID}:{SANDBOX_UID}:patchheal:/tmp:/bin/sh\n",
    f"patchheal:x:{SANDBOX_UID}:\n",
)
# Documentation and translations are dead weight in a sandbox image.
_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
# ... but not the locale aliases `locale-gen` reads.
_INCLUDES = ("/usr/share/locale/locale.alias",)
# An image with the `locales` package gets the UTF-8 locales a hosted CI runner has
# (C.UTF-8 comes with libc): generated once at build time (~3 MB), not `locales-all`
# (~220 MB of every locale).
GENERATED_LOCALES = ("en_US.UTF-8 UTF-8",)
_LOCALES = (
    'if [ -x "$1/usr/sbin/locale-gen" ]; then '
    f"printf '%s\\n' {' '.join(repr(x) for x in GENERATED_LOCALES)} > \"$1/etc/locale.gen\" && "
    'chroot "$1" /usr/sbin/locale-gen >/dev/null; fi'
)
_HOOK = (
    'mkdir -p "$1/workspace" "$1/opt/patchheal" && '
    f"printf '%s' '{_USER_LINES[0].strip()}\\n' >> \"$1/etc/passwd\" && "
    f"printf '%s' '{_USER_LINES[1].strip()}\\n' >> \"$1/etc/group\" && "
    f"{_LOCALES} && "
    f"{bytecode.rootfs_hook()} && "
    'rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/lib/apt/lists/"*'
)


def debian_rootfs(tarball: Path, suite: str, mirror: str, packages: Sequence[str], say: Say) -> str:
    """Write a Debian root filesystem tarball; returns the tool that made it."""
    started = time.monotonic()
    mmdebstrap = which_or_install("mmdebstrap", "mmdebstrap", say)
    if mmdebstrap is not None:
        say(f"building a {suite} root filesystem with mmdebstrap ({', '.join(packages)})")
        argv = [
            mmdebstrap,
            "--quiet",
            "--variant=apt",
            f"--include={','.join(packages)}",
            *(f"--dpkgopt=path-exclude={p}" for p in _EXCLUDES),
            *(f"--dpkgopt=path-include={p}" for p in _INCLUDES),
            # No fsync per unpacked file: the root is packed into a tarball and thrown away
            # if the build dies, so dpkg's crash safety buys nothing here.
            "--dpkgopt=force-unsafe-io",
            f"--customize-hook={_HOOK}",
            suite,
            str(tarball),
            mirror,
        ]
        result = proc.run(argv, timeout=1800)
        if result.passed:
            say(f"mmdebstrap took {time.monotonic() - started:.0f} s")
            return "mmdebstrap"
        say(f"mmdebstrap failed (exit {result.exit_code}):\n{result.output[-1500:]}")
    return _debootstrap(tarball, suite, mirror, packages, say)


def _debootstrap(tarball: Path, suite: str, mirror: str, packages: Sequence[str], say: Say) -> str:
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root and mmdebstrap is not usable")
    debootstrap = which_or_install("debootstrap", "debootstrap", say)
    if debootstrap is None:
        raise ImageBuildError("neither mmdebstrap nor debootstrap is available")
    say(f"building a {suite} root filesystem with debootstrap")
    with tempfile.TemporaryDirectory(prefix="patchheal-debootstrap-") as tmp:
        root = Path(tmp) / "root"
        argv = [debootstrap, "--variant=minbase", f"--include={','.join(packages)}"]
        result = proc.run([*argv, suite, str(root), mirror], timeout=3600)
        if not result.passed:
            raise ImageBuildError(f"debootstrap failed:\n{result.output[-1500:]}")
        for rel, line in zip(("etc/passwd", "etc/group"), _USER_LINES, strict=True):
            with (root / rel).open("a", encoding="utf-8") as handle:
                handle.write(line)
        for rel in ("workspace", "opt/patchheal"):
            (root / rel).mkdir(parents=True, exist_ok=True)
        proc.run(["/bin/sh", "-c", _LOCALES, "locales", str(root)], timeout=600)
        proc.run(["/bin/sh", "-c", bytecode.rootfs_hook(), "bytecode", str(root)], timeout=600)
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        packed = proc.run(["tar", "-C", str(root), "-cf", str(tarball), "."], timeout=1800)
        if not packed.passed:
            raise ImageBuildError(f"packing the debootstrap root failed:\n{packed.output[-800:]}")
    return "debootstrap"


def host_runtime_rootfs(tarball: Path) -> list[str]:
    """An almost empty root; returns the host paths to mount read-only at run time."""
    mounts = ["/usr"]
    links: dict[str, str] = {}
    # /sbin stays a real directory: the engine mounts its init at /sbin/docker-init,
    # which must not land in the read-only host /usr.
    for top in ("bin", "lib", "lib64", "lib32"):
        host = Path("/") / top
        if host.is_symlink():
            links[top] = str(host.readlink()).lstrip("/")
        elif host.is_dir():
            mounts.append(str(host))
    mounts += [p for p in ("/etc/ssl", "/etc/alternatives", "/etc/ld.so.cache") if Path(p).exists()]
    files = {
        "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" + _USER_LINES[0],
        "etc/group": "root:x:0:\n" + _USER_LINES[1],
        "etc/hosts": "127.0.0.1 localhost\n",
    }
    with tarfile.open(tarball, "w") as archive:
        for rel in (
            "usr",
            "sbin",
            "tmp",
            "workspace",
            "opt/patchheal",
            "etc",
            "proc",
            "sys",
            "dev",
        ):
            info = tarfile.TarInfo(rel)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if rel == "tmp" else 0o755
            archive.addfile(info)
        for rel in mounts:
            if rel != "/usr" and Path(rel).is_dir():
                info = tarfile.TarInfo(rel.lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return mounts


def build(
    tarball: Path, suite: str, mirror: str, packages: tuple[str, ...], say: Say
) -> tuple[str, list[str]]:
    """Try the offline builders in order: $PATCHHEAL_IMAGE_BUILDERS, default
    'debian,host-runtime'; returns the builder that worked and the host mounts it needs."""
    builders = os.environ.get("PATCHHEAL_IMAGE_BUILDERS", "debian,host-runtime").split(",")
    errors: list[str] = []
    for builder in (b.strip() for b in builders):
        if builder == "debian":
            try:
                return debian_rootfs(tarball, suite, mirror, packages, say), []
            except ImageBuildError as exc:
                errors.append(str(exc))
                say(f"no Debian root filesystem ({exc})")
        elif builder == "host-runtime":
            say("building a host-runtime image: the host's /usr mounted read-only at run time")
            return "host-runtime", host_runtime_rootfs(tarball)
        else:
            raise ImageBuildError(f"PATCHHEAL_IMAGE_BUILDERS: unknown builder {builder!r}")
    raise ImageBuildError("no offline image builder worked: " + "; ".join(errors))


def which_or_install(tool: str, package: str, say: Say) -> str | None:
    """The path of `tool`, installing its Debian package first when we are root."""
    found = shutil.which(tool)
    if found or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return found
    say(f"{tool} is missing; installing the Debian package {package} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = proc.run(["apt-get", "install", "-y", "-q", package], env=env, timeout=600)
    if not result.passed:
        proc.run(["apt-get", "update", "-q"], env=env, timeout=600)
        result = proc.run(["apt-get", "install", "-y", "-q", package], env=env, timeout=600)
    if not result.passed:
        say(f"apt-get install {package} failed:\n{result.output[-1000:]}")
    return shutil.which(tool)
