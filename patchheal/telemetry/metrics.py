"""StatsD metrics over UDP, with DogStatsD-style tags.

A metrics outage must be invisible to a run: the address is resolved once, the
socket never blocks, and every send error is swallowed (logged at debug
level). With no host configured every call is a no-op.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

# Characters with a meaning in the DogStatsD line format (and whitespace).
_UNSAFE = re.compile(r"[\s:|#,@]")


def _clean(text: str) -> str:
    return _UNSAFE.sub("_", text)


def _format(name: str, value: str, kind: str, tags: Mapping[str, str] | None) -> bytes:
    line = f"{_clean(name)}:{value}|{kind}"
    if tags:
        line += "|#" + ",".join(f"{_clean(str(k))}:{_clean(str(v))}" for k, v in tags.items())
    return line.encode()


# The seed spec's metric names start with `task.` (`task.self_heal.attempts_total`).
DEFAULT_PREFIX = "task"


class Metrics:
    """Counters and durations for the loop; `host=None` disables them.

    Every name is sent as `<prefix>.<name>`; the prefix defaults to the seed's `task`.
    """

    def __init__(
        self, host: str | None = None, port: int = 8125, *, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.prefix = f"{prefix.rstrip('.')}." if prefix else ""
        self._sock: socket.socket | None = None
        self._address: Any = None  # an (host, port[, flow, scope]) tuple from getaddrinfo
        if not host:
            return
        if not 0 < port < 65536:  # getaddrinfo would wrap it silently
            log.warning("StatsD metrics disabled: port %s is out of range", port)
            return
        try:
            family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
        except (OSError, OverflowError, UnicodeError) as exc:
            log.warning("StatsD metrics disabled: cannot reach %s:%s (%s)", host, port, exc)
            return
        self._sock, self._address = sock, address

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def incr(self, name: str, value: int = 1, *, tags: Mapping[str, str] | None = None) -> None:
        if self._sock is not None:
            self._send(name, lambda: str(int(value)), "c", tags)

    def duration(self, name: str, seconds: float, *, tags: Mapping[str, str] | None = None) -> None:
        """A duration in the unit its name says: `*_seconds` as a histogram of seconds,
        `*_ms` as a StatsD timer in milliseconds. Any other name is a programming error."""
        if name.endswith("_seconds"):
            value, kind = (lambda: f"{float(seconds):.6f}"), "h"
        elif name.endswith("_ms"):
            value, kind = (lambda: f"{float(seconds) * 1000:.3f}"), "ms"
        else:
            raise ValueError(f"metric {name!r}: a duration's name ends in _seconds or _ms")
        if self._sock is not None:
            self._send(name, value, kind, tags)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _send(
        self,
        name: str,
        value: Callable[[], str],
        kind: str,
        tags: Mapping[str, str] | None,
    ) -> None:
        if self._sock is None or self._address is None:
            return
        try:
            packet = _format(self.prefix + name, value(), kind, tags)
            self._sock.sendto(packet, self._address)
        # A full buffer, a refused port, no route, a value that is not a
        # number: never the run's problem.
        except (OSError, TypeError, ValueError) as exc:
            log.debug("StatsD metric %s dropped: %s", name, exc)
